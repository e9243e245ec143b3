package fanout

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/inboxd/inboxd/internal/lease"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
)

var fastLease = lease.Timing{TTL: 2 * time.Second, Renew: 200 * time.Millisecond, Margin: 500 * time.Millisecond}

// leaseRig is a NATS server with the leases bucket and a database.
type leaseRig struct {
	nc *nats.Conn
	kv jetstream.KeyValue
	st *store.Store
}

func newLeaseRig(t *testing.T) *leaseRig {
	t.Helper()
	nc, js := testenv.JetStream(t)
	kv, err := lease.EnsureBucket(context.Background(), js, 1, fastLease)
	if err != nil {
		t.Fatal(err)
	}
	return &leaseRig{nc: nc, kv: kv, st: testenv.Store(t)}
}

func (r *leaseRig) fanout(t *testing.T, node int, holder string) *Fanout {
	t.Helper()
	f, err := New(Options{Layout: layout, NodeID: node, Leases: r.kv, Holder: holder, LeaseTiming: fastLease},
		testenv.Logger(t), r.nc, r.st, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Fanouts with an automatic node id lease distinct ones; an override that a
// running fanout holds refuses the second start, naming the setting.
func TestNodeIDsAreLeasedDistinctly(t *testing.T) {
	r := newLeaseRig(t)
	ctx := ctxT(t, 30*time.Second)
	seen := map[int]bool{}
	for _, h := range []string{"a", "b", "c"} {
		f := r.fanout(t, AutoNodeID, h)
		if err := f.TakeNodeID(ctx); err != nil {
			t.Fatal(err)
		}
		kctx, cancel := context.WithCancel(ctx)
		t.Cleanup(cancel)
		go f.keepNodeID(kctx)
		if seen[f.Node()] {
			t.Fatalf("fanout %s got node id %d, which another running fanout holds", h, f.Node())
		}
		seen[f.Node()] = true
	}
	start := time.Now()
	err := r.fanout(t, 1, "d").TakeNodeID(ctx)
	if err == nil || !errors.Is(err, lease.ErrHeld) || !strings.Contains(err.Error(), "--node-id 1") {
		t.Fatalf("a second fanout with --node-id 1: %v, want a refusal naming --node-id 1", err)
	}
	// It waited for a holder that might have died (TTL + a renewal).
	if waited := time.Since(start); waited < fastLease.TTL {
		t.Fatalf("refused after %s, before a dead holder's lease could run out (%s)", waited, fastLease.TTL)
	}
}

// A fanout whose lease is no longer valid issues no msg_id; an override
// whose previous holder died is taken once the lease runs out.
func TestNoIDsWithoutAValidLease(t *testing.T) {
	r := newLeaseRig(t)
	ctx := ctxT(t, 30*time.Second)
	f := r.fanout(t, 4, "crashed")
	if err := f.TakeNodeID(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ids.next(); err != nil {
		t.Fatalf("with a fresh lease: %v", err)
	}
	// No renewals (a process cut off from NATS): the lease ends Margin
	// before the key expires.
	time.Sleep(fastLease.TTL - fastLease.Margin + 100*time.Millisecond)
	if _, err := f.ids.next(); !errors.Is(err, errNoNodeID) {
		t.Fatalf("after the lease's validity: %v, want errNoNodeID", err)
	}
	if f.Node() != -1 {
		t.Fatalf("Node() %d after the lease's validity, want -1", f.Node())
	}
	g := r.fanout(t, 4, "restarted")
	if err := g.TakeNodeID(ctx); err != nil {
		t.Fatalf("the same --node-id after its holder died: %v", err)
	}
	id, err := g.ids.next()
	if err != nil || g.Node() != 4 {
		t.Fatalf("restarted fanout: id %d node %d %v", id, g.Node(), err)
	}
}

// A lost lease (the key deleted and taken by another fanout) stops the
// ids at once, and the fanout takes another free node id.
func TestLostNodeIDIsReplaced(t *testing.T) {
	r := newLeaseRig(t)
	ctx := ctxT(t, 30*time.Second)
	f := r.fanout(t, AutoNodeID, "a")
	if err := f.TakeNodeID(ctx); err != nil {
		t.Fatal(err)
	}
	first := f.Node()
	kctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go f.keepNodeID(kctx)
	if err := r.kv.Delete(ctx, NodeIDKey(first)); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.Acquire(ctx, r.kv, NodeIDKey(first), "intruder", fastLease); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.Node() == first || f.Node() == -1 {
		if time.Now().After(deadline) {
			t.Fatalf("node id %d after its lease was taken by another holder: want another one", f.Node())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := f.ids.next(); err != nil {
		t.Fatal(err)
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
