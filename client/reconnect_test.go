package client

import (
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// A server that says when to come back (Error.retry_after_ms) is not
// dialled again before then: neither after a fatal error that ends a
// session nor after a refused hello. The backoff alone would be at most
// 50ms here.
func TestReconnectHonoursRetryHint(t *testing.T) {
	const hint = 300 * time.Millisecond
	s := newScripted(t, func(n int, _ *pb.Hello) proto.Message {
		if n == 2 {
			return &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "busy", RetryAfterMs: uint32(hint / time.Millisecond), Fatal: true}
		}
		return welcome(0)
	})
	_, sc := dialScripted(t, s, Options{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	sent := time.Now()
	sc.send(&pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "draining", RetryAfterMs: uint32(hint / time.Millisecond), Fatal: true})
	sc.close()
	s.next() // the third connection, past the refused second one
	at := s.helloTimes()
	if len(at) != 3 {
		t.Fatalf("%d hellos, want 3", len(at))
	}
	if d := at[1].Sub(sent); d < hint {
		t.Errorf("after a fatal error with retry_after_ms %v the client came back after %v", hint, d)
	}
	if d := at[2].Sub(at[1]); d < hint {
		t.Errorf("after a refused hello with retry_after_ms %v the client came back after %v", hint, d)
	}
}

// A client whose connection drops keeps trying (the server refuses a few
// hellos) and, once back, gets the unconfirmed messages again: each is
// handed over once, and the batch is confirmed on the new connection.
func TestReconnectAfterRefusalsResumesDelivery(t *testing.T) {
	var refused atomic.Int32
	s := newScripted(t, func(n int, _ *pb.Hello) proto.Message {
		if n >= 2 && n <= 4 {
			refused.Add(1)
			return &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, Message: "cannot open the inbox now", Fatal: true}
		}
		return welcome(2)
	})
	a := newApp()
	_, sc := dialScripted(t, s, Options{Handler: a.handle})
	// The first message of the batch is handed over; the connection drops
	// before the second arrives, so the batch is never confirmed.
	sc.batch(wire.BatchHeader{Lane: pb.Lane_LIVE, BatchID: 1}, msg(1, 1, 1))
	a.waitN(t, 1)
	sc.waitAcked(1)
	sc.batch(wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 2}, msg(1, 1, 1), msg(2, 1, 2))
	sc.close()

	sc = s.next()
	if n := refused.Load(); n != 3 {
		t.Fatalf("%d hellos refused before the client got back, want 3", n)
	}
	sc.batch(wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 1}, msg(1, 1, 1), msg(2, 1, 2))
	sc.waitAcked(1)
	checkOnceInOrder(t, a.quiet(200*time.Millisecond), 2)
	if len(s.helloTimes()) != 5 {
		t.Fatalf("hellos: %d, want 5", len(s.helloTimes()))
	}
}

// Close while a reconnect is half done (hello sent, welcome not yet in)
// returns at once and leaves no session up: the welcome that comes after
// Close does not start one.
func TestCloseDuringReconnectReturns(t *testing.T) {
	release := make(chan struct{})
	s := newScripted(t, func(n int, _ *pb.Hello) proto.Message {
		if n == 2 {
			<-release
		}
		return welcome(0)
	})
	c, sc := dialScripted(t, s, Options{})
	sc.close()
	for len(s.helloTimes()) < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	time.Sleep(50 * time.Millisecond) // Close is waiting for the run loop
	close(release)
	sc = s.next()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s of a welcome that came after it")
	}
	select {
	case <-sc.ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection that came up during Close is still open")
	}
}

// The reconnect delay is "full jitter" over an exponential cap, and at
// least a server's retry hint.
func TestReconnectDelay(t *testing.T) {
	o := Options{MinBackoff: 100 * time.Millisecond, MaxBackoff: 5 * time.Second}
	for attempt := range 20 {
		limit := min(o.MaxBackoff, o.MinBackoff<<attempt)
		distinct := map[time.Duration]bool{}
		for range 200 {
			d := o.reconnectDelay(attempt, 0)
			if d <= 0 || d > limit {
				t.Fatalf("attempt %d: delay %v outside (0, %v]", attempt, d, limit)
			}
			distinct[d] = true
			if h := o.reconnectDelay(attempt, 2*time.Second); h < 2*time.Second || h > 2*time.Second+limit {
				t.Fatalf("attempt %d with a 2s hint: delay %v outside [2s, 2s+%v]", attempt, h, limit)
			}
		}
		if len(distinct) < 10 {
			t.Fatalf("attempt %d: only %d distinct delays in 200: not jittered", attempt, len(distinct))
		}
	}
}
