package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/node"
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

// Two running copies of one device (same uid and device id) against a real
// node: the second login takes the session over, the first ends with
// ErrReplaced and stays down (it does not take the session back), so for
// several heartbeats the gateway replaces no other session, the second
// copy keeps its session, and a new message goes to it alone.
func TestSecondLoginOfTheSameDeviceTakesOver(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.Heartbeat = time.Second
	n := testnode.StartNode(t, cfg, config.RoleEmbeddedNATS|config.RoleGateway|config.RoleFanout|config.RoleSyncer)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ac := &admin.Client{NC: testnode.Admin(t, n)}
	conv, err := ac.CreateConv(ctx, admin.CreateConvRequest{Members: []int64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}

	// copyOf is one running application of device 2/"phone".
	type copyOf struct {
		c        *client.Client
		got      chan client.Message
		replaced chan error
	}
	start := func() *copyOf {
		a := &copyOf{got: make(chan client.Message, 16), replaced: make(chan error, 16)}
		a.c, err = client.Dial(ctx, client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, 2, "phone"),
			MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
			Handler: func(m client.Message) error { a.got <- m; return nil },
			OnError: func(err error) {
				if errors.Is(err, client.ErrReplaced) {
					a.replaced <- err
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.c.Close() })
		return a
	}
	first := start()
	second := start()

	select {
	case <-first.c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the first copy is still running 10s after the second logged in")
	}
	if err := first.c.Err(); !errors.Is(err, client.ErrReplaced) {
		t.Fatalf("the first copy ended with %v, want ErrReplaced", err)
	}
	select {
	case <-first.replaced:
	default:
		t.Error("the first copy's OnError did not get ErrReplaced")
	}

	time.Sleep(3 * cfg.Heartbeat) // a reconnecting first copy would be back by now
	select {
	case <-second.c.Done():
		t.Fatalf("the second copy stopped: %v", second.c.Err())
	case err := <-second.replaced:
		t.Fatalf("the second copy was replaced: %v", err)
	default:
	}
	if r := gatewayMetric(t, n, "inboxd_gateway_sessions_replaced_total"); r != 1 {
		t.Fatalf("the gateway replaced %v sessions, want 1 (the first copy's)", r)
	}
	if ss := n.Gateway.Sessions(2); len(ss) != 1 {
		t.Fatalf("uid 2 has %d sessions, want 1: %+v", len(ss), ss)
	}

	sender, err := client.Dial(ctx, client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, 1, "s")})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	sent, err := sender.Send(ctx, conv.ConvID, "after-takeover", "hello")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-second.got:
		if m.MsgID != sent.MsgID {
			t.Fatalf("the second copy got msg_id %d, want %d", m.MsgID, sent.MsgID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second copy did not get the message sent after the takeover")
	}
	select {
	case m := <-first.got:
		t.Fatalf("the replaced copy got msg_id %d", m.MsgID)
	default:
	}
}

// gatewayMetric reads an unlabelled metric of n from its ops endpoint.
func gatewayMetric(t *testing.T, n *node.Node, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.Ops.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("metric %s not exported", name)
	return 0
}
