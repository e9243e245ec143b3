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

func testAdmission(ceiling int, perSecond rate.Limit) (*admission, *metrics) {
	m := newMetrics(prometheus.NewRegistry())
	return newAdmission(ceiling, perSecond, admissionMetricsOf(m)), m
}

// The limit starts at the ceiling and follows the steering's level from
// the floor (level 0) to the ceiling (level 1); a raised limit admits the
// waiting logins at once. A ceiling below the floor bounds both.
func TestLoginLimitFollowsLevel(t *testing.T) {
	a, m := testAdmission(512, rate.Inf)
	if l := a.currentLimit(); l != 512 {
		t.Fatalf("limit starts at %v, want the ceiling 512", l)
	}
	for _, c := range []struct{ level, want float64 }{{0, loginFloor}, {0.5, 264}, {1, 512}, {-1, loginFloor}, {2, 512}} {
		a.scale(c.level)
		if l := a.currentLimit(); l != c.want {
			t.Fatalf("level %v: limit %v, want %v", c.level, l, c.want)
		}
		if g := testutil.ToFloat64(m.loginLimit); g != c.want {
			t.Fatalf("level %v: the gauge reads %v, want %v", c.level, g, c.want)
		}
	}

	a.scale(0)
	a.wait = time.Minute
	var held []*loginTicket
	for range loginFloor {
		tk, we := a.acquire(nil)
		if tk == nil {
			t.Fatalf("a login within the floor was refused: %v", we)
		}
		held = append(held, tk)
	}
	got := make(chan *loginTicket)
	go func() {
		tk, _ := a.acquire(nil)
		got <- tk
	}()
	waitFor(t, func() bool { return queued(a) == 1 })
	a.scale(1)
	if tk := <-got; tk == nil {
		t.Fatal("the raised limit did not admit the waiting login")
	} else {
		tk.done(false)
	}
	for _, tk := range held {
		tk.done(false)
	}

	c, _ := testAdmission(4, rate.Inf)
	c.scale(0)
	if l := c.currentLimit(); l != 4 {
		t.Fatalf("with --login-concurrency 4 the limit at level 0 is %v, want 4", l)
	}
}

// Logins without a slot wait in arrival order and get the freed slots in
// that order; one that waited its whole wait is refused with a fatal
// UNAVAILABLE and a retry hint of at least minRetryHint; one whose
// connection went away leaves the queue.
func TestLoginQueueFIFOThenRefused(t *testing.T) {
	a, m := testAdmission(1, rate.Inf)
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
	a, m := testAdmission(512, 1)
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
	g.admit, _ = testAdmission(1, rate.Inf)
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
