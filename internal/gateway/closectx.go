package gateway

import (
	"context"
	"slices"
	"sync"
	"time"
)

// closeCtx is a session's context: done when the session closes. It is
// context.WithCancel(context.Background()) without what that leaves behind:
// a cancelCtx keeps the contexts derived from it (every request's timeout)
// in a map that is allocated at the first and never shrinks, 184-263 bytes
// of every idle session (`inboxbench conns --profile`). A context with an
// AfterFunc method is told of its children through it instead (the context
// package's propagateCancel), and closeCtx keeps them in a slice that it
// drops when they have all ended.
type closeCtx struct {
	done chan struct{}

	mu     sync.Mutex
	closed bool
	next   uint64
	afters []afterEntry // functions to run at close, registered by derived contexts
}

type afterEntry struct {
	id uint64
	f  func()
}

func newCloseCtx() *closeCtx { return &closeCtx{done: make(chan struct{})} }

func (c *closeCtx) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *closeCtx) Done() <-chan struct{}       { return c.done }
func (c *closeCtx) Value(any) any               { return nil }

func (c *closeCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return context.Canceled
	}
	return nil
}

// AfterFunc runs f in its own goroutine once c is closed (at once if it
// is); stop unregisters f and reports whether that kept it from running,
// as context.AfterFunc's stop does.
func (c *closeCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		go f()
		return func() bool { return false }
	}
	c.next++
	id := c.next
	c.afters = append(c.afters, afterEntry{id, f})
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, a := range c.afters {
			if a.id == id {
				c.afters = slices.Delete(c.afters, i, i+1)
				if len(c.afters) == 0 {
					c.afters = nil
				}
				return true
			}
		}
		return false
	}
}

// close closes c and runs what derived contexts registered; later calls
// do nothing.
func (c *closeCtx) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	afters := c.afters
	c.afters = nil
	close(c.done)
	c.mu.Unlock()
	for _, a := range afters {
		go a.f()
	}
}
