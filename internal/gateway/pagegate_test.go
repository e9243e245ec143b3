package gateway

import (
	"context"
	"testing"
	"time"
)

// TestPageGateServesFirstPagesFirst: with every slot taken, a waiting
// first page gets the next free slot ahead of later pages that waited
// longer, and a waiter that gives up does not take a slot with it.
func TestPageGateServesFirstPagesFirst(t *testing.T) {
	g := newPageGate(1)
	hold, err := g.acquire(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 3)
	wait := func(name string, first bool) {
		rel, err := g.acquire(context.Background(), first)
		if err != nil {
			t.Error(err)
			return
		}
		order <- name
		rel()
	}
	go wait("later-1", false)
	waitQueued(t, g, 0, 1)
	// A waiter that gives up leaves the queue.
	ctx, cancel := context.WithCancel(context.Background())
	gaveUp := make(chan error, 1)
	go func() {
		_, err := g.acquire(ctx, false)
		gaveUp <- err
	}()
	waitQueued(t, g, 0, 2)
	cancel()
	if err := <-gaveUp; err == nil {
		t.Fatal("a cancelled wait got a slot")
	}
	waitQueued(t, g, 0, 1)
	go wait("first", true)
	waitQueued(t, g, 1, 1)
	hold()
	if a, b := <-order, <-order; a != "first" || b != "later-1" {
		t.Fatalf("served %s then %s; want the first page ahead", a, b)
	}
	// Every slot is back.
	rel, err := g.acquire(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if g.free != 1 {
		t.Fatalf("%d slots free after everything returned, want 1", g.free)
	}
}

func waitQueued(t *testing.T, g *pageGate, first, rest int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		g.mu.Lock()
		f, r := len(g.first), len(g.rest)
		g.mu.Unlock()
		if f == first && r == rest {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("waiters did not reach %d first / %d later", first, rest)
}
