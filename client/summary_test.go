package client

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire/pb"
)

// SummaryAll follows has_more page by page, each asked with the previous
// page's next_before_msg_id, and returns every conversation once, newest
// last message first; Conversations() holds them all. Summary keeps asking
// for the first page only.
func TestSummaryAllFollowsPages(t *testing.T) {
	// 7 conversations; conversation i's last message has msg_id 100*i.
	const convs, page = 7, 3
	var all []*pb.ConvSummary
	for i := int64(convs); i >= 1; i-- {
		all = append(all, &pb.ConvSummary{ConvId: i, Unread: i, LastSeq: 10 * i, ReadSeq: 10*i - i, LastMsgId: 100 * i})
	}
	s := newScripted(t, nil)
	c, sc := dialScripted(t, s, Options{})
	sc.answer(func(m proto.Message) proto.Message {
		r, ok := m.(*pb.SummaryRequest)
		if !ok {
			return nil
		}
		out := &pb.Summary{RequestId: r.GetRequestId()}
		for _, cs := range all {
			if r.GetBeforeMsgId() != 0 && cs.GetLastMsgId() >= r.GetBeforeMsgId() {
				continue
			}
			if len(out.Convs) == page {
				out.HasMore = true
				out.NextBeforeMsgId = out.Convs[page-1].GetLastMsgId()
				break
			}
			out.Convs = append(out.Convs, cs)
		}
		return out
	})

	got, err := c.SummaryAll(waitCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, cs := range got {
		ids = append(ids, cs.GetConvId())
	}
	if want := []int64{7, 6, 5, 4, 3, 2, 1}; !slices.Equal(ids, want) {
		t.Fatalf("SummaryAll returned conversations %v, want %v", ids, want)
	}
	var befores []int64
	for _, r := range ofType[*pb.SummaryRequest](sc.frames()) {
		befores = append(befores, r.GetBeforeMsgId())
	}
	if want := []int64{0, 500, 200}; !slices.Equal(befores, want) {
		t.Fatalf("pages asked with before_msg_id %v, want %v", befores, want)
	}
	for _, cs := range all {
		if cv := c.Conversations()[cs.GetConvId()]; cv.LastSeq != cs.GetLastSeq() || cv.Unread() != cs.GetUnread() {
			t.Errorf("conversation %d: %+v, want last_seq %d unread %d", cs.GetConvId(), cv, cs.GetLastSeq(), cs.GetUnread())
		}
	}

	first, err := c.Summary(waitCtx(t))
	if err != nil || len(first.GetConvs()) != page || !first.GetHasMore() {
		t.Fatalf("Summary: %v %v, want the first page of %d with has_more", first, err, page)
	}
}

// A server whose has_more pages do not move to older messages would make
// SummaryAll loop: it stops with an error instead.
func TestSummaryAllStopsOnAPageThatDoesNotMove(t *testing.T) {
	s := newScripted(t, nil)
	c, sc := dialScripted(t, s, Options{})
	sc.answer(func(m proto.Message) proto.Message {
		r, ok := m.(*pb.SummaryRequest)
		if !ok {
			return nil
		}
		return &pb.Summary{RequestId: r.GetRequestId(), Convs: []*pb.ConvSummary{{ConvId: 1, LastMsgId: 50}}, HasMore: true, NextBeforeMsgId: 50}
	})
	if _, err := c.SummaryAll(waitCtx(t)); err == nil {
		t.Fatal("SummaryAll over pages that repeat returned no error")
	}
	if n := len(ofType[*pb.SummaryRequest](sc.frames())); n != 2 {
		t.Fatalf("%d summary requests, want 2 (the second page repeats the first)", n)
	}
}
