package gateway

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

func testAdmission(ceiling int, target time.Duration, perSecond rate.Limit) (*admission, *metrics) {
	m := newMetrics(prometheus.NewRegistry())
	return newAdmission(ceiling, target, perSecond, admissionMetricsOf(m)), m
}

// feed gives the limit n login latencies of lat, each with the whole
// limit in use, and returns the limits after each.
func feed(a *admission, n int, lat time.Duration) []float64 {
	var out []float64
	for range n {
		a.mu.Lock()
		a.sampleLocked(lat, int(a.limit))
		out = append(out, a.limit)
		a.mu.Unlock()
	}
	return out
}

// The limit follows the login latency: down while logins take longer
// than the target, up while they are faster, never beyond its floor and
// ceiling; and not up while the budget is not what limits the logins.
func TestLoginLimitFollowsLatency(t *testing.T) {
	const target = 100 * time.Millisecond
	a, m := testAdmission(512, target, rate.Inf)
	if l := a.currentLimit(); l != loginStart {
		t.Fatalf("limit starts at %v, want %d", l, loginStart)
	}
	slow := feed(a, 300, 2*target)
	if slow[len(slow)-1] != loginFloor {
		t.Fatalf("after 300 logins at twice the target the limit is %v, want the floor %d", slow[len(slow)-1], loginFloor)
	}
	prev := float64(loginStart)
	for i, l := range slow {
		if l > prev || l < loginFloor {
			t.Fatalf("sample %d at twice the target: the limit went from %v to %v (want down, not below %d)", i, prev, l, loginFloor)
		}
		prev = l
	}
	if g := testutil.ToFloat64(m.loginLimit); g != loginFloor {
		t.Fatalf("the limit gauge reads %v, want %d", g, loginFloor)
	}
	fast := feed(a, 2000, target/10)
	if fast[len(fast)-1] != 512 {
		t.Fatalf("after 2000 logins at a tenth of the target the limit is %v, want the ceiling 512", fast[len(fast)-1])
	}
	rose := false
	prev = loginFloor
	for i, l := range fast {
		if l > 512 {
			t.Fatalf("sample %d: the limit %v is above the ceiling", i, l)
		}
		rose = rose || l > prev
		prev = l
	}
	if !rose {
		t.Fatal("the limit never rose while logins were faster than the target")
	}

	// Fast logins with most of the budget unused do not grow it.
	b, _ := testAdmission(512, target, rate.Inf)
	b.mu.Lock()
	for range 100 {
		b.sampleLocked(target/10, 1)
	}
	l := b.limit
	b.mu.Unlock()
	if l != loginStart {
		t.Fatalf("an idle budget grew to %v, want %d", l, loginStart)
	}

	// A ceiling below the floor and the start bounds both.
	c, _ := testAdmission(4, target, rate.Inf)
	if got := feed(c, 50, 3*target); got[len(got)-1] != 4 {
		t.Fatalf("with --login-concurrency 4 the limit went to %v under slow logins, want 4", got[len(got)-1])
	}
}

// The automatic target is 4 × the fastest login seen, at least 50 ms.
func TestLoginTargetAutomatic(t *testing.T) {
	a, _ := testAdmission(512, 0, rate.Inf)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sampleLocked(2*time.Millisecond, 1)
	if got := a.targetLocked(); got != minLoginTarget {
		t.Fatalf("target %v after a 2 ms login, want %v", got, minLoginTarget)
	}
	a.fastest = 40 * time.Millisecond
	if got := a.targetLocked(); got != 160*time.Millisecond {
		t.Fatalf("target %v with the fastest login at 40 ms, want 160ms", got)
	}
}

// Logins without a slot wait in arrival order and get the freed slots in
// that order; one that waited its whole wait is refused with a fatal
// UNAVAILABLE and a retry hint of at least minRetryHint; one whose
// connection went away leaves the queue.
func TestLoginQueueFIFOThenRefused(t *testing.T) {
	a, m := testAdmission(1, time.Hour, rate.Inf)
	a.wait = time.Minute
	first, we := a.acquire(nil)
	if first == nil || we != nil {
		t.Fatalf("the first login was not admitted at once: %v", we)
	}
	const waiters = 5
	order := make(chan int, waiters)
	tickets := make(chan *loginTicket, waiters)
	for i := range waiters {
		go func() {
			tk, we := a.acquire(nil)
			if we != nil {
				t.Errorf("waiter %d refused: %v", i, we)
				return
			}
			order <- i
			tickets <- tk
		}()
		waitFor(t, func() bool { return queued(a) == i+1 })
	}
	first.done(false)
	for want := range waiters {
		got := <-order
		if got != want {
			t.Fatalf("waiter %d got the slot, want waiter %d (arrival order)", got, want)
		}
		if queued(a) != waiters-want-1 {
			t.Fatalf("%d still queued after waiter %d got its slot", queued(a), got)
		}
		(<-tickets).done(false)
	}

	// Over the wait: refused.
	a.wait = 100 * time.Millisecond
	hold, _ := a.acquire(nil)
	start := time.Now()
	tk, we := a.acquire(nil)
	if tk != nil || we == nil {
		t.Fatal("a login was admitted beyond the limit")
	}
	if waited := time.Since(start); waited < a.wait {
		t.Fatalf("refused after %v, before its wait of %v", waited, a.wait)
	}
	if we.Code != pb.ErrorCode_UNAVAILABLE || !we.Fatal || time.Duration(we.RetryAfterMs)*time.Millisecond < minRetryHint {
		t.Fatalf("refusal %+v: want fatal UNAVAILABLE with retry_after_ms ≥ %v", we, minRetryHint)
	}
	if n := testutil.ToFloat64(m.loginsRefused.WithLabelValues("concurrency")); n != 1 {
		t.Fatalf("%v concurrency refusals counted, want 1", n)
	}

	// A waiter whose connection closes leaves the queue, unrefused.
	a.wait = time.Minute
	gone := make(chan struct{})
	left := make(chan bool)
	go func() {
		tk, we := a.acquire(func() <-chan struct{} { return gone })
		left <- tk == nil && we == nil
	}()
	waitFor(t, func() bool { return queued(a) == 1 })
	close(gone)
	if !<-left {
		t.Fatal("a waiter whose connection closed was admitted or refused, want it gone")
	}
	if queued(a) != 0 {
		t.Fatalf("%d queued after the waiter left", queued(a))
	}
	hold.done(false)
	if again, _ := a.acquire(nil); again == nil {
		t.Fatal("the slot was not free after its holder gave it back")
	}
}

// Logins over the rate are refused at once, and their hints differ: the
// refused clients do not come back in lock-step.
func TestLoginRateRefusalsSpread(t *testing.T) {
	a, m := testAdmission(512, 0, 1)
	if tk, we := a.acquire(nil); tk == nil || we != nil {
		t.Fatalf("the first login was refused: %v", we)
	}
	const n = 30
	hints := map[uint32]int{}
	for range n {
		start := time.Now()
		tk, we := a.acquire(nil)
		if tk != nil || we == nil {
			t.Fatal("a login over the rate was admitted")
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("a rate refusal took %v, want at once", d)
		}
		if we.Code != pb.ErrorCode_UNAVAILABLE || !we.Fatal || time.Duration(we.RetryAfterMs)*time.Millisecond < minRetryHint {
			t.Fatalf("refusal %+v: want fatal UNAVAILABLE with retry_after_ms ≥ %v", we, minRetryHint)
		}
		hints[we.RetryAfterMs]++
	}
	if len(hints) < n/2 {
		t.Fatalf("%d refusals got only %d distinct retry hints (%v): want them spread", n, len(hints), hints)
	}
	if got := testutil.ToFloat64(m.loginsRefused.WithLabelValues("rate")); got != n {
		t.Fatalf("%v rate refusals counted, want %d", got, n)
	}
}

// A login that waits for a slot on a real connection leaves the queue
// when its client hangs up (the close watch).
func TestWaitingLoginLeavesWhenClientCloses(t *testing.T) {
	g := loginTestGateway(zap.NewNop())
	g.admit, _ = testAdmission(1, time.Hour, rate.Inf)
	g.admit.wait = time.Minute
	hold, _ := g.admit.acquire(nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := newConn(g, server, &tcpTransport{r: bufio.NewReader(server), max: wire.DefaultMaxFrame})
	defer c.close()
	f, _ := wire.AppendFrame(nil, &pb.Hello{Token: "x"})
	if _, err := client.Write(append([]byte{0, 0, 0, byte(len(f))}, f...)); err != nil {
		t.Fatal(err)
	}
	ended := make(chan bool)
	go func() { ended <- c.hello() }()
	waitFor(t, func() bool { return queued(g.admit) == 1 })
	client.Close()
	select {
	case ok := <-ended:
		if ok {
			t.Fatal("the login of a closed connection went on")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a waiting login did not notice its client hung up")
	}
	if queued(g.admit) != 0 {
		t.Fatalf("%d logins still queued", queued(g.admit))
	}
	hold.done(false)
}

func queued(a *admission) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queue.Len()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}
