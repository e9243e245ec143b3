package e2e

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// readersRunning counts the gateway's reader goroutines (Conn.readLoop
// on any stack) in this process.
func readersRunning() int {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte("gateway.(*Conn).readLoop("))
}

// waitParked waits until the gateway reports want parked connections.
func waitParked(t *testing.T, get func() float64, want float64) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for get() != want {
		if time.Now().After(deadline) {
			t.Fatalf("parked connections %v, want %v", get(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Idle logged-in connections, over TCP and WebSocket, hold no reader
// goroutine (their sockets wait in the gateway's epoll set); a parked
// connection still receives live messages, wakes for the frames its
// client sends (sends, acks) and parks again, and one closed by the
// server while parked (its device logged in elsewhere) ends and is
// forgotten like any other.
func TestIdleConnectionsParkWithoutAReader(t *testing.T) {
	n := testnode.AllInOne(t)
	parked := func() float64 { return metric(t, n, "inboxd_gateway_parked_connections") }
	const users = 40
	uids := make([]int64, users)
	got := make([]chan client.Message, users)
	clients := make([]*client.Client, users)
	for i := range users {
		uids[i] = int64(500 + i)
	}
	conv := createConv(t, n, true, uids...)
	for i, uid := range uids {
		tr := "tcp"
		if i%2 == 1 {
			tr = "ws"
		}
		ch := make(chan client.Message, 64)
		got[i] = ch
		url := n.Gateway.WSURL()
		if tr == "tcp" {
			url = "tcp://" + n.Gateway.TCPAddr()
		}
		c, err := client.Dial(ctxT(t, 10*time.Second), client.Options{URL: url, Token: testenv.Token(t, uid, "desk"),
			Handler: func(m client.Message) error { ch <- m; return nil }})
		if err != nil {
			t.Fatalf("dial %s as %d: %v", tr, uid, err)
		}
		t.Cleanup(func() { c.Close() })
		clients[i] = c
	}
	waitParked(t, parked, users)
	if r := readersRunning(); r > 2 {
		t.Fatalf("%d reader goroutines for %d idle connections (all parked by the gauge); want none but one waking", r, users)
	}

	// A parked sender wakes for its send frames; every parked member gets
	// each message on the live lane, in order.
	ctx := ctxT(t, 60*time.Second)
	const msgs = 5
	for k := range msgs {
		if _, err := clients[0].Send(ctx, conv, fmt.Sprintf("park-%d", k), fmt.Sprintf("m%d", k)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range users {
		for k := range msgs {
			select {
			case m := <-got[i]:
				if m.Text != fmt.Sprintf("m%d", k) {
					t.Fatalf("user %d: message %d is %q, want m%d", uids[i], k, m.Text, k)
				}
			case <-ctx.Done():
				t.Fatalf("user %d got %d of %d messages", uids[i], k, msgs)
			}
		}
	}
	// The acks woke them; once handled, every one parks again.
	waitParked(t, parked, users)

	// The server closes a parked connection (its device logs in on a new
	// connection: SESSION_REPLACED, which ends that client): it ends, and
	// the gateway forgets it.
	again := dial(t, n, "tcp", uids[3], "desk")
	select {
	case <-clients[3].Done():
	case <-ctx.Done():
		t.Fatal("the replaced client did not end")
	}
	deadline := time.Now().Add(15 * time.Second)
	for metric(t, n, "inboxd_gateway_connections") != users {
		if time.Now().After(deadline) {
			t.Fatalf("%v connections after a parked one was replaced; want %d", metric(t, n, "inboxd_gateway_connections"), users)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitParked(t, parked, users)
	if again.Welcome() == nil {
		t.Fatal("the new login has no welcome")
	}
}

// An idle TLS connection is never parked: its record layer may hold
// decrypted bytes the socket no longer shows, which no readiness event
// would announce, so it keeps its reader goroutine (poller_linux.go). Idle over wss and
// TLS TCP, both keep a reader, the parked gauge stays 0, and both get a
// live message. With TLS connections parked like plain ones the gauge
// reads 2 and the test fails.
func TestIdleTLSConnectionsKeepTheirReader(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.TLSCert, cfg.TLSKey = certFile, keyFile
	n := testnode.StartNode(t, cfg, allRoles)
	conv := createConv(t, n, true, 1, 2, 3)
	ctx := ctxT(t, 30*time.Second)
	readers0 := readersRunning()
	var got []chan client.Message
	for i, url := range []string{n.Gateway.WSURL(), "tls://" + n.Gateway.TCPAddr()} {
		ch := make(chan client.Message, 4)
		got = append(got, ch)
		c, err := client.Dial(ctx, client.Options{URL: url, Token: testenv.Token(t, int64(2+i), "desk"), TLSConfig: &tls.Config{RootCAs: pool},
			Handler: func(m client.Message) error { ch <- m; return nil }})
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		t.Cleanup(func() { c.Close() })
	}
	// Idle for a second: a plain connection parks at once.
	time.Sleep(time.Second)
	if p := metric(t, n, "inboxd_gateway_parked_connections"); p != 0 {
		t.Fatalf("%v idle TLS connections parked, want 0", p)
	}
	if r := readersRunning() - readers0; r < 2 {
		t.Fatalf("%d reader goroutines for 2 idle TLS connections, want one each", r)
	}
	sender, err := client.Dial(ctx, client.Options{URL: n.Gateway.WSURL(), Token: testenv.Token(t, 1, "laptop"), TLSConfig: &tls.Config{RootCAs: pool}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sender.Close() })
	r, err := sender.Send(ctx, conv, "tls-idle", "to idle TLS devices")
	if err != nil {
		t.Fatal(err)
	}
	for i, ch := range got {
		select {
		case m := <-ch:
			if m.MsgID != r.MsgID {
				t.Fatalf("TLS device %d got message %d, want %d", i, m.MsgID, r.MsgID)
			}
		case <-ctx.Done():
			t.Fatalf("idle TLS device %d did not get the message", i)
		}
	}
}
