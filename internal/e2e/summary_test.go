package e2e

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// A user with more conversations than a summary page holds gets the first
// page in the welcome and the rest by summary_request{before_msg_id}: every
// conversation once, newest last message first, has_more false at the end.
func TestSummaryPagesOverTheWire(t *testing.T) {
	n := testnode.AllInOne(t)
	const convs = 410 // pages of 200, 200, 10
	ids := make([]int64, convs)
	for i := range ids {
		ids[i] = createConv(t, n, true, 1, 2)
	}
	snd, err := client.Dial(ctxT(t, 20*time.Second), client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, 1, "sender")})
	if err != nil {
		t.Fatal(err)
	}
	defer snd.Close()
	ctx := ctxT(t, 60*time.Second)
	var pending []*client.PendingSend
	for i, conv := range ids {
		pending = append(pending, snd.SendAsync(conv, "s-"+strconv.Itoa(i), "hello "+strconv.Itoa(i)))
	}
	for _, p := range pending {
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}

	c := dialRaw(t, n.Gateway.TCPAddr())
	page := c.hello(2).GetSummary()
	seen := map[int64]bool{}
	var last int64
	for pages := 1; ; pages++ {
		for _, cs := range page.GetConvs() {
			if seen[cs.GetConvId()] {
				t.Fatalf("conversation %d on two pages", cs.GetConvId())
			}
			seen[cs.GetConvId()] = true
			if cs.GetUnread() != 1 {
				t.Fatalf("conversation %d: unread %d, want 1", cs.GetConvId(), cs.GetUnread())
			}
			if last != 0 && cs.GetLastMsgId() >= last {
				t.Fatalf("summary not ordered by last message, newest first: %d after %d", cs.GetLastMsgId(), last)
			}
			last = cs.GetLastMsgId()
		}
		if !page.GetHasMore() {
			if pages != 3 || len(seen) != convs {
				t.Fatalf("%d conversations over %d pages, want %d over 3", len(seen), pages, convs)
			}
			break
		}
		if len(page.GetConvs()) != 200 || page.GetNextBeforeMsgId() != last {
			t.Fatalf("page %d: %d conversations, next_before_msg_id %d (last %d)", pages, len(page.GetConvs()), page.GetNextBeforeMsgId(), last)
		}
		if pages > 3 {
			t.Fatal("more than 3 pages")
		}
		c.write(&pb.SummaryRequest{RequestId: uint64(pages), BeforeMsgId: page.GetNextBeforeMsgId()})
		for page = nil; page == nil; {
			switch m := c.read().(type) {
			case *pb.Summary:
				if m.GetRequestId() != uint64(pages) {
					t.Fatalf("summary answers request %d, want %d", m.GetRequestId(), pages)
				}
				page = m
			case *pb.Error:
				t.Fatalf("summary_request: %v", m)
			case nil:
				t.Fatal("connection closed")
			}
		}
	}
}

// When the summary cannot be read (Postgres too slow or away), the login
// fails with UNAVAILABLE, which the client retries, instead of telling the
// device it has nothing unread; once Postgres answers the login works.
func TestLoginFailsWhenSummaryFails(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	sendN(t, n, 1, conv, 1, "sum")
	ctx := context.Background()
	tx, err := n.Store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) }) // before the node stops, also when the test fails
	if _, err := tx.Exec(ctx, `LOCK TABLE msg_content IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, n.Gateway.TCPAddr())
	c.write(&pb.Hello{Token: testenv.Token(t, 2, "raw"), DeviceKind: "desktop"})
	if m := c.read(); m != nil {
		if w, ok := m.(*pb.Welcome); ok {
			t.Fatalf("welcome with summary %v while the summary could not be read", w.GetSummary())
		}
		if e, ok := m.(*pb.Error); !ok || e.Code != pb.ErrorCode_UNAVAILABLE || !e.Fatal {
			t.Fatalf("got %v, want fatal UNAVAILABLE", m)
		}
	}
	_ = tx.Rollback(ctx)
	w := dialRaw(t, n.Gateway.TCPAddr()).hello(2)
	if s := w.GetSummary().GetConvs(); len(s) != 1 || s[0].GetConvId() != conv || s[0].GetUnread() != 1 {
		t.Fatalf("summary after Postgres came back: %v", w.GetSummary())
	}
}

// A summary_request with a negative before_msg_id is answered with
// INVALID_ARGUMENT, and the connection goes on (the next request works).
func TestSummaryRequestNegativeBeforeRefused(t *testing.T) {
	n := testnode.AllInOne(t)
	c, err := client.Dial(ctxT(t, 20*time.Second), client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, 1, "d")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := ctxT(t, 20*time.Second)
	_, err = c.SummaryPage(ctx, -5)
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != pb.ErrorCode_INVALID_ARGUMENT {
		t.Fatalf("summary before_msg_id -5: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := c.SummaryPage(ctx, 0); err != nil {
		t.Fatalf("the next summary request on the same connection: %v", err)
	}
}
