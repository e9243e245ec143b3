package lease_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/lease"
	"github.com/inboxd/inboxd/internal/testenv"
)

// Short timings so that expiries happen within the test.
var fast = lease.Timing{TTL: 2 * time.Second, Renew: 200 * time.Millisecond, Margin: 500 * time.Millisecond}

func bucket(t *testing.T) jetstream.KeyValue {
	t.Helper()
	_, js := testenv.JetStream(t)
	kv, err := lease.EnsureBucket(context.Background(), js, 1, fast)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// A key has one holder at a time; a kept lease outlives its TTL; a
// released one is free at once.
func TestLeaseOneHolderAtATime(t *testing.T) {
	kv := bucket(t)
	ctx := context.Background()
	a, err := lease.Acquire(ctx, kv, "node.1", "a", fast)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Acquire(ctx, kv, "node.1", "b", fast); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second holder: %v, want ErrHeld", err)
	}
	kctx, stop := context.WithCancel(ctx)
	kept := make(chan error, 1)
	go func() { kept <- a.Keep(kctx) }()
	time.Sleep(2 * fast.TTL)
	if !a.Valid() {
		t.Fatal("a kept lease is not valid after twice its TTL")
	}
	if _, err := lease.Acquire(ctx, kv, "node.1", "b", fast); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second holder of a kept lease after twice the TTL: %v, want ErrHeld", err)
	}
	if h, err := lease.Holder(ctx, kv, "node.1"); err != nil || h != "a" {
		t.Fatalf("holder %q %v, want a", h, err)
	}
	stop()
	if err := <-kept; !errors.Is(err, context.Canceled) {
		t.Fatalf("Keep ended with %v, want context.Canceled", err)
	}
	if a.Valid() {
		t.Fatal("a released lease is still valid")
	}
	if _, err := lease.Acquire(ctx, kv, "node.1", "b", fast); err != nil {
		t.Fatalf("after the release: %v, want the lease", err)
	}
}

// A holder that stops renewing (a crash, a cut from NATS) counts its lease
// as over Margin before the key expires, and only then can another take it.
func TestLeaseExpiresAfterValidity(t *testing.T) {
	kv := bucket(t)
	ctx := context.Background()
	start := time.Now()
	a, err := lease.Acquire(ctx, kv, "node.2", "a", fast)
	if err != nil {
		t.Fatal(err)
	}
	var invalidAt, takenAt time.Time
	for time.Since(start) < 3*fast.TTL {
		if invalidAt.IsZero() && !a.Valid() {
			invalidAt = time.Now()
		}
		if _, err := lease.Acquire(ctx, kv, "node.2", "b", fast); err == nil {
			takenAt = time.Now()
			break
		} else if !errors.Is(err, lease.ErrHeld) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if takenAt.IsZero() {
		t.Fatalf("the key of a holder that stopped renewing was not free after %s", 3*fast.TTL)
	}
	if invalidAt.IsZero() || !invalidAt.Before(takenAt) {
		t.Fatalf("the old holder was valid until %v, the new one took the key at %v: overlap", invalidAt, takenAt)
	}
	if takenAt.Sub(start) < fast.TTL {
		t.Fatalf("the key was taken %s after the last write, before its TTL %s", takenAt.Sub(start), fast.TTL)
	}
}

// A renewal that finds another revision (the key was deleted and taken by
// someone else) loses the lease at once.
func TestLeaseLostOnRevisionChange(t *testing.T) {
	kv := bucket(t)
	ctx := context.Background()
	a, err := lease.Acquire(ctx, kv, "syncer.leader", "a", fast)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "syncer.leader"); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Acquire(ctx, kv, "syncer.leader", "b", fast); err != nil {
		t.Fatal(err)
	}
	err = a.Keep(ctx)
	if !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Keep: %v, want ErrLost", err)
	}
	if a.Valid() {
		t.Fatal("a lost lease is valid")
	}
}

// Hold runs the work on one holder at a time and moves it to another when
// the first one ends.
func TestHoldRunsOnOneHolder(t *testing.T) {
	kv := bucket(t)
	var running, most atomic.Int32
	work := func(ctx context.Context) error {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-ctx.Done()
		running.Add(-1)
		return ctx.Err()
	}
	ctx1, stop1 := context.WithCancel(context.Background())
	ctx2, stop2 := context.WithCancel(context.Background())
	defer stop2()
	done1 := make(chan struct{})
	go func() { _ = lease.Hold(ctx1, kv, "syncer.leader", "one", fast, testenv.Logger(t), work); close(done1) }()
	time.Sleep(300 * time.Millisecond)
	go func() { _ = lease.Hold(ctx2, kv, "syncer.leader", "two", fast, testenv.Logger(t), work) }()
	time.Sleep(fast.TTL)
	if h, _ := lease.Holder(context.Background(), kv, "syncer.leader"); h != "one" {
		t.Fatalf("holder %q, want one", h)
	}
	stop1()
	<-done1
	deadline := time.Now().Add(2 * fast.TTL)
	for {
		if h, _ := lease.Holder(context.Background(), kv, "syncer.leader"); h == "two" && running.Load() == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the work did not move to the second holder")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if m := most.Load(); m != 1 {
		t.Fatalf("the work ran on %d holders at once", m)
	}
}

// A holder whose lease ran out of validity while its key still holds its
// value (cut off from NATS for a while) gets it back at once; once another
// holder has the key, or the key expired, it does not.
func TestLeaseResume(t *testing.T) {
	kv := bucket(t)
	ctx := context.Background()
	a, err := lease.Acquire(ctx, kv, "node.3", "a", fast)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(fast.TTL - fast.Margin + 100*time.Millisecond)
	if a.Valid() {
		t.Fatal("valid past its validity")
	}
	back, err := lease.Resume(ctx, a)
	if err != nil || !back.Valid() {
		t.Fatalf("resume while the key holds our value: %v", err)
	}
	if err := kv.Delete(ctx, "node.3"); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Acquire(ctx, kv, "node.3", "b", fast); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Resume(ctx, back); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("resume of a key another holder took: %v, want ErrHeld", err)
	}
}
