package e2e

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

func TestSendStoredOverBothTransports(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	for i, tr := range []string{"ws", "tcp"} {
		c := dial(t, n, tr, 1, "phone-"+tr)
		res, err := c.Send(ctxT(t, 20*time.Second), conv, "m-"+tr, "hello over "+tr)
		if err != nil {
			t.Fatalf("%s: %v", tr, err)
		}
		if res.MsgID <= 0 || res.ConvSeq != int64(i+1) {
			t.Fatalf("%s: result %+v, want conv_seq %d", tr, res, i+1)
		}
	}
	// Both members' inboxes hold both messages, the sender's included.
	for _, uid := range []int64{1, 2} {
		es := testenv.InboxEntries(t, n.NC, testnode.Config(t, "").Layout, uid)
		if len(es) != 2 || es[0].ConvSeq != 1 || es[1].ConvSeq != 2 {
			t.Fatalf("inbox of %d: %+v", uid, es)
		}
	}
}

func TestRetriedSendIsStoredOnce(t *testing.T) {
	n := testnode.AllInOne(t)
	layout := testnode.Config(t, "").Layout
	members := []int64{10, 11, 12}
	conv := createConv(t, n, true, members...)
	ctx := ctxT(t, 60*time.Second)

	// Before STORED: two devices of the sender race the same client_msg_id,
	// as a client that reconnected elsewhere and retried would.
	a := dial(t, n, "ws", 10, "a")
	b := dial(t, n, "tcp", 10, "b")
	pa := a.SendAsync(conv, "dup-1", "once")
	pb1 := b.SendAsync(conv, "dup-1", "once")
	ra, err := pa.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := pb1.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ra != rb {
		t.Fatalf("concurrent retries answered differently: %+v vs %+v", ra, rb)
	}

	// After STORED: the same id again, much later, on a new connection.
	c := dial(t, n, "ws", 10, "c")
	rc, err := c.Send(ctx, conv, "dup-1", "a different text is ignored")
	if err != nil {
		t.Fatal(err)
	}
	if rc != ra {
		t.Fatalf("retry after STORED: %+v, original %+v", rc, ra)
	}

	if got := count(t, n, `SELECT count(*) FROM msg_content WHERE sender_uid = 10 AND client_msg_id = 'dup-1'`); got != 1 {
		t.Fatalf("%d content rows, want 1", got)
	}
	for _, uid := range members {
		es := testenv.InboxEntries(t, n.NC, layout, uid)
		if len(es) != 1 || es[0].MsgID != ra.MsgID {
			t.Fatalf("inbox of %d holds %d entries (%+v), want exactly msg %d", uid, len(es), es, ra.MsgID)
		}
	}
}

func TestNonMemberSendIsRejectedAndStoresNothing(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, true, 20, 21)
	c := dial(t, n, "ws", 99, "intruder")
	_, err := c.Send(ctxT(t, 20*time.Second), conv, "x-1", "let me in")
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != pb.ErrorCode_NOT_MEMBER {
		t.Fatalf("err = %v, want NOT_MEMBER", err)
	}
	// The refusal is remembered: a retry gets the same answer.
	_, err = c.Send(ctxT(t, 20*time.Second), conv, "x-1", "let me in")
	if !errors.As(err, &we) || we.Code != pb.ErrorCode_NOT_MEMBER {
		t.Fatalf("retry: err = %v, want NOT_MEMBER", err)
	}
	_, err = c.Send(ctxT(t, 20*time.Second), 424242, "x-2", "nowhere")
	if !errors.As(err, &we) || we.Code != pb.ErrorCode_CONV_NOT_FOUND {
		t.Fatalf("unknown conversation: err = %v, want CONV_NOT_FOUND", err)
	}
	if got := count(t, n, `SELECT count(*) FROM msg_content`); got != 0 {
		t.Fatalf("%d content rows after rejected sends", got)
	}
	if got := count(t, n, `SELECT last_seq FROM conversation WHERE conv_id = $1`, conv); got != 0 {
		t.Fatalf("last_seq %d after rejected sends", got)
	}
	layout := testnode.Config(t, "").Layout
	for _, uid := range []int64{20, 21, 99} {
		if es := testenv.InboxEntries(t, n.NC, layout, uid); len(es) != 0 {
			t.Fatalf("inbox of %d holds %d entries after rejected sends", uid, len(es))
		}
	}
}

func TestInvalidSendIsRejected(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	c := dial(t, n, "tcp", 1, "d")
	for name, s := range map[string]struct {
		cmid, text string
	}{
		"empty client_msg_id": {"", "x"},
		"control characters":  {"a\nb", "x"},
		"too long client id":  {string(make([]byte, 200)), "x"},
		"invalid utf-8 text":  {"u-1", "\xff\xfe"},
		"text over the limit": {"u-2", string(make([]byte, 17<<10))},
	} {
		_, err := c.Send(ctxT(t, 10*time.Second), conv, s.cmid, s.text)
		var we *wire.Error
		if !errors.As(err, &we) || we.Code != pb.ErrorCode_INVALID_ARGUMENT {
			t.Errorf("%s: err = %v, want INVALID_ARGUMENT", name, err)
		}
	}
	if got := count(t, n, `SELECT count(*) FROM msg_content`); got != 0 {
		t.Fatalf("%d content rows after invalid sends", got)
	}
}

func TestGroupOf50ConcurrentSendersDenseOrderedInboxes(t *testing.T) {
	n := testnode.AllInOne(t)
	layout := testnode.Config(t, "").Layout
	var members []int64
	for uid := int64(100); uid < 150; uid++ {
		members = append(members, uid)
	}
	conv := createConv(t, n, true, members...)
	const senders, each = 5, 40
	ctx := ctxT(t, 120*time.Second)
	var wg sync.WaitGroup
	errs := make(chan error, senders)
	for s := 0; s < senders; s++ {
		c := dial(t, n, []string{"ws", "tcp"}[s%2], members[s], "dev")
		wg.Add(1)
		go func(s int, c *client.Client) {
			defer wg.Done()
			var pending []*client.PendingSend
			for i := 0; i < each; i++ {
				pending = append(pending, c.SendAsync(conv, fmt.Sprintf("s%d-%d", s, i), fmt.Sprintf("from %d #%d", s, i)))
			}
			for _, p := range pending {
				if _, err := p.Wait(ctx); err != nil {
					errs <- err
					return
				}
			}
		}(s, c)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const total = senders * each
	if got := count(t, n, `SELECT count(*) FROM msg_content WHERE conv_id = $1`, conv); got != total {
		t.Fatalf("%d content rows, want %d", got, total)
	}
	// conv_seq is dense: exactly 1..total.
	if got := count(t, n, `SELECT count(DISTINCT conv_seq) FROM msg_content WHERE conv_id = $1 AND conv_seq BETWEEN 1 AND $2`, conv, total); got != total {
		t.Fatalf("conv_seq not dense: %d distinct values in 1..%d", got, total)
	}
	for _, uid := range members {
		es := testenv.InboxEntries(t, n.NC, layout, uid)
		if len(es) != total {
			t.Fatalf("inbox of %d holds %d entries, want %d", uid, len(es), total)
		}
		for i, e := range es {
			if e.ConvSeq != int64(i+1) {
				t.Fatalf("inbox of %d: entry %d has conv_seq %d: inbox order disagrees with conv_seq", uid, i, e.ConvSeq)
			}
		}
	}
}
