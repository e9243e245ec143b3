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
	if g.busy != 0 {
		t.Fatalf("%d slots busy after everything returned, want 0", g.busy)
	}
}

// A lowered gate lets the reads running finish and starts no new one until
// fewer than its slots run; raised, it starts the waiters at once.
func TestPageGateResize(t *testing.T) {
	g := newPageGate(3)
	var held []func()
	for range 3 {
		rel, err := g.acquire(context.Background(), false)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, rel)
	}
	g.resize(1)
	started := make(chan func(), 2)
	for range 2 {
		go func() {
			rel, err := g.acquire(context.Background(), false)
			if err != nil {
				t.Error(err)
				return
			}
			started <- rel
		}()
	}
	waitQueued(t, g, 0, 2)
	held[0]()
	held[1]()
	// Two of three finished: one still runs, the gate's one slot is taken.
	select {
	case <-started:
		t.Fatal("a read started with as many running as the lowered gate allows")
	case <-time.After(50 * time.Millisecond):
	}
	held[2]()
	rel := <-started
	waitQueued(t, g, 0, 1)
	g.resize(2)
	rel2 := <-started
	rel()
	rel2()
	if g.busy != 0 {
		t.Fatalf("%d busy after all returned", g.busy)
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
