package gateway

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A context derived from a session's closeCtx is registered through its
// AfterFunc (no goroutine, no map), forgotten once it ends, and cancelled
// when the session closes; one derived after the close is cancelled at once.
func TestCloseCtxChildren(t *testing.T) {
	c := newCloseCtx()
	ended, cancelEnded := context.WithTimeout(c, time.Hour)
	live, cancelLive := context.WithTimeout(c, time.Hour)
	defer cancelLive()
	c.mu.Lock()
	n := len(c.afters)
	c.mu.Unlock()
	if n != 2 {
		t.Fatalf("%d children registered, want 2", n)
	}
	cancelEnded()
	if !errors.Is(ended.Err(), context.Canceled) {
		t.Fatalf("ended child: %v", ended.Err())
	}
	c.mu.Lock()
	n = len(c.afters)
	c.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d children registered after one ended, want 1", n)
	}
	if c.Err() != nil || live.Err() != nil {
		t.Fatalf("before close: %v, %v", c.Err(), live.Err())
	}
	c.close()
	c.close() // a second close does nothing
	select {
	case <-live.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the live child was not cancelled by the close")
	}
	if !errors.Is(c.Err(), context.Canceled) || !errors.Is(live.Err(), context.Canceled) {
		t.Fatalf("after close: %v, %v", c.Err(), live.Err())
	}
	if c.afters != nil {
		t.Fatalf("%d functions kept after the close", len(c.afters))
	}
	late, cancelLate := context.WithTimeout(c, time.Hour)
	defer cancelLate()
	if !errors.Is(late.Err(), context.Canceled) {
		t.Fatalf("child derived after the close: %v", late.Err())
	}
	ran := make(chan struct{})
	if stop := c.AfterFunc(func() { close(ran) }); stop() {
		t.Error("stop after the close reported that it kept f from running")
	}
	select {
	case <-ran:
	case <-time.After(5 * time.Second):
		t.Fatal("AfterFunc after the close did not run")
	}
}
