package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// The client against a real inboxd node (embedded NATS, Postgres, the
// gateway over TCP and WebSocket): what the scripted server of the other
// tests plays is what the gateway does. Sends are stored once (a repeated
// client_msg_id gets the original msg_id), an offline receiver gets every
// message once and in conv_seq order, its messages are confirmed (a new
// session has nothing pending), and SummaryAll lists every conversation
// (three groups of the same two users) with its unread count.
func TestAgainstRealNode(t *testing.T) {
	n := testnode.AllInOne(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ac := &admin.Client{NC: testnode.Admin(t, n)}
	var convs []int64
	for range 3 {
		r, err := ac.CreateConv(ctx, admin.CreateConvRequest{Members: []int64{1, 2}, Group: true})
		if err != nil {
			t.Fatal(err)
		}
		convs = append(convs, r.ConvID)
	}

	sender, err := client.Dial(ctx, client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, 1, "s")})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	const per = 20
	var pending []*client.PendingSend
	for i := range per {
		for _, conv := range convs {
			pending = append(pending, sender.SendAsync(conv, fmt.Sprintf("%d-%d", conv, i), fmt.Sprintf("message %d", i)))
		}
	}
	ids := map[int64]bool{}
	for _, p := range pending {
		r, err := p.Wait(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids[r.MsgID] = true
	}
	again, err := sender.Send(ctx, convs[0], fmt.Sprintf("%d-0", convs[0]), "message 0")
	if err != nil || !ids[again.MsgID] {
		t.Fatalf("a repeated client_msg_id: %+v %v, want the original msg_id", again, err)
	}

	var mu sync.Mutex
	got := map[int64][]client.Message{}
	total := 0
	done := make(chan struct{})
	handler := func(m client.Message) error {
		mu.Lock()
		defer mu.Unlock()
		got[m.ConvID] = append(got[m.ConvID], m)
		if total++; total == per*len(convs) {
			close(done)
		}
		return nil
	}
	receiver, err := client.Dial(ctx, client.Options{URL: n.Gateway.WSURL(), Token: testenv.Token(t, 2, "r"), Handler: handler})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("the receiver got %d of %d messages", total, per*len(convs))
	}
	sum, err := receiver.SummaryAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // anything more would be a duplicate
	receiver.Close()

	mu.Lock()
	for _, conv := range convs {
		ms := got[conv]
		if len(ms) != per {
			t.Errorf("conversation %d: %d messages, want %d", conv, len(ms), per)
		}
		for i, m := range ms {
			if m.ConvSeq != int64(i+1) || m.Late || !ids[m.MsgID] {
				t.Errorf("conversation %d: message %d is #%d (late %v, msg_id %d)", conv, i, m.ConvSeq, m.Late, m.MsgID)
			}
		}
	}
	mu.Unlock()
	if len(sum) != len(convs) {
		t.Fatalf("SummaryAll: %d conversations, want %d", len(sum), len(convs))
	}
	for _, cs := range sum {
		if cs.GetUnread() != per {
			t.Errorf("summary of conversation %d: unread %d, want %d", cs.GetConvId(), cs.GetUnread(), per)
		}
	}

	// Everything was confirmed: a new session of the device starts at the head.
	check, err := client.Dial(ctx, client.Options{URL: n.Gateway.WSURL(), Token: testenv.Token(t, 2, "r")})
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	if p := check.Welcome().GetPending(); p != 0 {
		t.Fatalf("after the receiver confirmed everything %d entries are pending", p)
	}
}
