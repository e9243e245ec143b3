package gateway

import (
	"context"
	"sync"
)

// firstPageSize bounds a session's first backfill page: in a login storm
// every device gets something on its screen early, before any device gets
// its second page.
const firstPageSize = 50

// pageSlots is how many backfill page reads run at once per gateway at
// most; the live-first steering (livesteer.go) lowers it, to 4 at least,
// while live messages are late.
const pageSlots = 16

// pageGate admits backfill page reads (a fetch or an archive read, the
// bodies, the encoding) a few at a time for the whole gateway, first pages
// of sessions ahead of later ones. Without it a login storm serves devices
// in whatever order their reads reach NATS and Postgres: measured, 9,000
// devices × 200 messages gave the median device its first message after
// 22 s, the whole drain taking 36 s.
type pageGate struct {
	mu    sync.Mutex
	slots int             // reads allowed at once now
	busy  int             // reads running
	first []chan struct{} // waiting first pages, FIFO
	rest  []chan struct{} // waiting later pages, FIFO
}

func newPageGate(slots int) *pageGate { return &pageGate{slots: slots} }

// acquire waits for a slot; the returned func gives it back.
func (g *pageGate) acquire(ctx context.Context, first bool) (func(), error) {
	g.mu.Lock()
	if g.busy < g.slots && (first || len(g.first) == 0) {
		g.busy++
		g.mu.Unlock()
		return g.release, nil
	}
	ch := make(chan struct{})
	if first {
		g.first = append(g.first, ch)
	} else {
		g.rest = append(g.rest, ch)
	}
	g.mu.Unlock()
	select {
	case <-ch:
		return g.release, nil
	case <-ctx.Done():
		g.mu.Lock()
		if removeWaiter(&g.first, ch) || removeWaiter(&g.rest, ch) {
			g.mu.Unlock()
			return nil, ctx.Err()
		}
		g.mu.Unlock()
		// Granted meanwhile: pass the slot on.
		g.release()
		return nil, ctx.Err()
	}
}

func (g *pageGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.busy--
	g.grantLocked()
}

// grantLocked hands free slots to waiters, first pages first.
func (g *pageGate) grantLocked() {
	for g.busy < g.slots {
		switch {
		case len(g.first) > 0:
			close(g.first[0])
			g.first = g.first[1:]
		case len(g.rest) > 0:
			close(g.rest[0])
			g.rest = g.rest[1:]
		default:
			return
		}
		g.busy++
	}
}

// resize sets how many reads may run at once (at least 1). Lowered, the
// reads running finish; no new one starts until fewer than n run.
func (g *pageGate) resize(n int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.slots = max(n, 1)
	g.grantLocked()
}

func removeWaiter(q *[]chan struct{}, ch chan struct{}) bool {
	for i, c := range *q {
		if c == ch {
			*q = append((*q)[:i], (*q)[i+1:]...)
			return true
		}
	}
	return false
}
