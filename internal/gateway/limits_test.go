package gateway

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
)

// A user's buckets outlive its sessions: the sweep keeps a set while any
// bucket in it is short of full, so taking everything and coming back
// (a reconnect) finds the bucket as it was left; once every bucket is full
// again the set is forgotten, and the next use gets a full set, which is
// what it would have found anyway.
func TestUserBucketsForgottenOnlyWhenFull(t *testing.T) {
	opts := DefaultOptions()
	opts.SendRate = 10 // burst 20
	b := newUserBuckets(&opts, func(int) {})
	now := time.Now()
	u := b.of(1)
	for range 20 {
		if r, _ := reserve(u.sends, now, 1); r == nil {
			t.Fatal("a full send bucket refused within its burst")
		}
	}
	if r, wait := reserve(u.sends, now, 1); r != nil || wait <= 0 {
		t.Fatalf("an empty send bucket granted a send (wait %s)", wait)
	}
	b.sweep(now.Add(time.Second)) // 10 of 20 back: not full
	if b.of(1) != u {
		t.Fatal("the sweep forgot buckets that were not full: a reconnect would refill them")
	}
	if r, _ := reserve(b.of(1).sends, now.Add(time.Second), 11); r != nil {
		t.Fatal("after 1 s at 10/s, 11 sends were granted")
	}
	full := now.Add(sweepAfterFull(&opts))
	b.sweep(full)
	if b.len() != 0 {
		t.Fatalf("%d bucket sets held after every bucket refilled", b.len())
	}
	if got := b.of(1).sends.TokensAt(full); got != 20 {
		t.Fatalf("a forgotten user's new send bucket holds %.1f tokens, want the burst 20", got)
	}
}

// sweepAfterFull is a time by which every default bucket (the entry bucket
// is the slowest: 20,000 at 2,000/s) has refilled from empty.
func sweepAfterFull(o *Options) time.Duration {
	return time.Duration(float64(o.SendEntryBurst)/float64(o.SendEntryRate)*float64(time.Second)) + time.Second
}

// The entry burst defaults to the larger of twice the rate and the
// largest group, so that a send to it can pass from a full bucket.
func TestSendEntryBurstFollowsRate(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		want int
	}{{2000, 20000}, {50000, 100000}, {1, 20000}} {
		o := Options{SendEntryRate: rate.Limit(tc.rate)}
		o.setDefaults()
		if o.SendEntryBurst != tc.want {
			t.Errorf("--send-entry-rate %g: burst %d, want %d", tc.rate, o.SendEntryBurst, tc.want)
		}
	}
}

// addrConn is a net.Conn that only has a remote address (the gate keys
// on the connection and its address, and does no I/O).
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c *addrConn) RemoteAddr() net.Addr { return c.remote }

func connFrom(ip string) net.Conn {
	return &addrConn{remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 40000}}
}

// The gate admits up to its caps, per address and in total, and a
// connection that ends its hello frees its place (once).
func TestPreauthGateCaps(t *testing.T) {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "refused"}, []string{"cap"})
	g := newPreauthGate(4, 2, prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"}), refused)
	a1, a2, a3 := connFrom("10.0.0.1"), connFrom("10.0.0.1"), connFrom("10.0.0.1")
	if !g.admit(a1) || !g.admit(a2) {
		t.Fatal("refused within the per-address cap")
	}
	if g.admit(a3) {
		t.Fatal("a third connection from one address admitted (cap 2)")
	}
	// IPv6: one /64 is one address.
	v1, v2, v3 := connFrom("2001:db8::1"), connFrom("2001:db8::ffff:2"), connFrom("2001:db8:0:1::1")
	if !g.admit(v1) || !g.admit(v2) {
		t.Fatal("refused within the per-/64 cap")
	}
	if g.admit(connFrom("2001:db8::3")) {
		t.Fatal("a third connection from one /64 admitted")
	}
	if g.admit(v3) {
		t.Fatal("a fifth connection admitted (total cap 4)")
	}
	g.done(a1)
	g.done(a1) // twice: frees one place only
	if !g.admit(a3) {
		t.Fatal("a place freed by a finished hello was not given again")
	}
	if g.admit(v3) {
		t.Fatal("done counted twice for one connection")
	}
	if len(g.conns) != 4 || g.byIP[remoteKey(a2)] != 2 {
		t.Fatalf("gate holds %d connections, %d from 10.0.0.1; want 4 and 2", len(g.conns), g.byIP[remoteKey(a2)])
	}
}

// Member counts are cached for their TTL (a membership change is priced
// right at most that late), conversations that do not exist too, and the
// cache stays within its bound.
func TestMemberCountsCachedWithinTTLAndBound(t *testing.T) {
	lookups := 0
	counts := map[int64]int{1: 2, 2: 2000}
	mc := newMemberCounts(func(_ context.Context, conv int64) (int, error) {
		lookups++
		return counts[conv], nil
	}, 50*time.Millisecond, 8)
	ctx := context.Background()
	for range 3 {
		if n, _ := mc.members(ctx, 2); n != 2000 {
			t.Fatalf("members %d, want 2000", n)
		}
		if n, _ := mc.members(ctx, 99); n != 0 {
			t.Fatalf("a missing conversation has %d members", n)
		}
	}
	if lookups != 2 {
		t.Fatalf("%d lookups for 2 conversations within the TTL, want 2", lookups)
	}
	counts[2] = 3000
	time.Sleep(60 * time.Millisecond)
	if n, _ := mc.members(ctx, 2); n != 3000 {
		t.Fatalf("after the TTL the count is %d, want the new 3000", n)
	}
	for conv := range int64(100) {
		_, _ = mc.members(ctx, 1000+conv)
	}
	if len(mc.m) > 8 {
		t.Fatalf("cache holds %d entries, bound 8", len(mc.m))
	}
}
