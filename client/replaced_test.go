package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire/pb"
)

// replacedBy is the error the gateway sends when the same device logged in
// on another connection (gateway Conn.replaced).
var replacedBy = &pb.Error{Code: pb.ErrorCode_SESSION_REPLACED, Message: "this device logged in on another connection", Fatal: true}

// errorsSeen collects what OnError receives without ever blocking the client.
type errorsSeen chan error

func (e errorsSeen) add(err error) {
	select {
	case e <- err:
	default:
	}
}

func (e errorsSeen) replaced() int {
	n := 0
	for {
		select {
		case err := <-e:
			if errors.Is(err, ErrReplaced) {
				n++
			}
		default:
			return n
		}
	}
}

// SESSION_REPLACED ends the client for good: the newer login of the device
// wins, so the replaced client does not dial again (two running copies of
// one device would otherwise take the session from each other in a loop).
// It reports ErrReplaced once to OnError, closes Done, and answers Err,
// Close, its pending send and any later call with ErrReplaced. Only a new
// Dial logs the device in again. The backoff here is at most 50ms: a client
// that reconnects does so many times over while the test watches.
func TestReplacedStopsReconnecting(t *testing.T) {
	s := newScripted(t, nil)
	errs := make(errorsSeen, 64)
	c, sc := dialScripted(t, s, Options{OnError: errs.add})
	p := c.SendAsync(1, "m1", "hello")
	sc.waitFrames("the send", func(got []proto.Message) bool { return len(ofType[*pb.Send](got)) == 1 })
	sc.send(replacedBy)
	sc.close()

	select {
	case <-c.Done():
	case <-time.After(2 * time.Second):
		t.Error("Done not closed within 2s of SESSION_REPLACED")
	}
	time.Sleep(500 * time.Millisecond) // ten times the longest backoff
	if n := len(s.helloTimes()); n != 1 {
		t.Errorf("the client said hello %d times after SESSION_REPLACED, want 0", n-1)
	}
	if n := errs.replaced(); n != 1 {
		t.Errorf("OnError got ErrReplaced %d times, want once", n)
	}
	if err := c.Err(); !errors.Is(err, ErrReplaced) {
		t.Errorf("Err() = %v, want ErrReplaced", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := p.Wait(ctx); !errors.Is(err, ErrReplaced) {
		t.Errorf("the pending send ended with %v, want ErrReplaced", err)
	}
	if _, err := c.SendAsync(1, "m2", "after").Wait(ctx); !errors.Is(err, ErrReplaced) {
		t.Errorf("a send after the replacement ended with %v, want ErrReplaced", err)
	}
	if _, _, err := c.Pull(ctx, 1, 0, 0, 10); !errors.Is(err, ErrReplaced) {
		t.Errorf("a pull after the replacement ended with %v, want ErrReplaced", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		if !errors.Is(err, ErrReplaced) {
			t.Errorf("Close() = %v, want ErrReplaced", err)
		}
	case <-time.After(2 * time.Second):
		t.Error("Close did not return within 2s")
	}
	if t.Failed() {
		return
	}

	// The application decides to take the session back: a new Dial does.
	c2, _ := dialScripted(t, s, Options{})
	if err := c2.Err(); err != nil {
		t.Fatalf("a new Dial after the replacement: Err() = %v", err)
	}
}
