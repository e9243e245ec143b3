package gateway

import (
	"container/list"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// Login admission: a per-gateway budget on the login phase, from the
// hello's arrival to its welcome (the token check, the device's session,
// the summary, the consumer). A login storm (300 devices at 9 a.m., a
// gateway restart) is the classic incident: every login is expensive
// (Postgres, JetStream), and without a budget they all run at once and
// the connected devices' live traffic waits behind them. With it, the
// logins run at the concurrency the live path allows, the rest wait a
// moment and are then told when to come back.
//
// Two budgets, both per gateway:
//
//   - concurrency: a limit on logins in progress, set by the gateway's
//     live-first steering (livesteer.go) between loginFloor and
//     LoginConcurrency: at the ceiling while live messages arrive on time
//     (or none arrive: a storm alone is not held back), lower while they
//     are late. A login without a slot waits in a FIFO for at most
//     loginWait, then is refused.
//   - rate: a token bucket of logins per second (LoginRate); a login over
//     it is refused at once.
//
// The login latency itself does not steer the limit: in a storm every
// login is slow (each waits for its share of two cores), and a limit that
// followed it throttled a storm that harmed nobody (measured: 3,000 × 200
// drained in 13.7-24.2 s against 8.1-8.5 s without admission). What a
// storm must not do is delay live messages, so that is what is measured.
//
// A refusal is a fatal UNAVAILABLE error frame with retry_after_ms: at
// least minRetryHint, and spread over the expected wait: each refused
// login gets the next return time at the pace the gateway admits logins
// (its limit over the logins' average latency, or its rate), plus jitter,
// so that the refused clients come back one after the other, not in
// lock-step. Only the login phase is admitted: a connected device's
// frames, sends and deliveries never pass here.

const (
	loginFloor = 16 // the limit's floor (or LoginConcurrency, if lower)
	// loginWait is the longest a login waits for a slot. 5 s: measured
	// (commit c6e3f5e), a 3,000-device storm
	// with 1 s had 1,161-1,479 logins refused and dialled again and
	// drained in 12.2-16.7 s; with 5 s, none, in 9.8-12.7 s (first page
	// p99 7.0-10.3 s -> 4.8-5.7 s). The wait and a login under a storm
	// stay within the 10 s that both client packages give a dial and its
	// welcome, and within the gateway's hello timeout.
	loginWait = 5 * time.Second
	// minRetryHint is the shortest retry_after_ms of a refusal; maxRetryHint the longest.
	minRetryHint = 250 * time.Millisecond
	maxRetryHint = 60 * time.Second
	// latencyWeight weighs a login's latency against the running average
	// (the pace of the retry hints).
	latencyWeight = 0.1
	// defaultLoginLatency stands for the average before any login ended.
	defaultLoginLatency = 50 * time.Millisecond
)

// admission is one gateway's login budget.
type admission struct {
	ceiling, floor float64
	wait           time.Duration
	bucket         *rate.Limiter // nil: no rate limit
	jitter         func(n int64) int64
	m              admissionMetrics

	mu       sync.Mutex
	limit    float64
	inflight int
	queue    list.List     // *loginWaiter, oldest first
	latency  time.Duration // running average of login latencies
	// nextReturn is the earliest return time not yet handed to a refused
	// login: the hints of the refused are spaced at the pace the gateway
	// admits logins, so that they come back one after the other instead
	// of together (a wave refused at once would return at once).
	nextReturn time.Time
}

type admissionMetrics struct {
	admitted prometheus.Counter
	refused  *prometheus.CounterVec // budget: concurrency, rate
	limit    prometheus.Gauge
}

func admissionMetricsOf(m *metrics) admissionMetrics {
	return admissionMetrics{admitted: m.loginsAdmitted, refused: m.loginsRefused, limit: m.loginLimit}
}

// loginWaiter is a login waiting for a slot; granted (under the mutex)
// when release handed it one.
type loginWaiter struct {
	ready   chan struct{}
	granted bool
}

func newAdmission(ceiling int, perSecond rate.Limit, m admissionMetrics) *admission {
	a := &admission{
		ceiling: float64(max(ceiling, 1)),
		wait:    loginWait,
		jitter:  rand.Int64N,
		m:       m,
	}
	a.floor = min(loginFloor, a.ceiling)
	a.limit = a.ceiling
	if perSecond > 0 && perSecond != rate.Inf {
		a.bucket = rate.NewLimiter(perSecond, loginBurst(perSecond))
	}
	a.m.limit.Set(a.limit)
	return a
}

// loginBurst is the rate bucket's size: a tenth of a second of the rate,
// at least 1.
func loginBurst(r rate.Limit) int {
	return max(1, int(min(float64(r)/10, 1<<30)))
}

// loginTicket is an admitted login's slot; done gives it back.
type loginTicket struct {
	a    *admission
	at   time.Time
	once sync.Once
}

// acquire admits a login or refuses it with the error frame to send. A
// login that must wait calls queued once, for a channel closed when its
// connection is gone: it then leaves the queue (nil ticket, nil error).
func (a *admission) acquire(queued func() <-chan struct{}) (*loginTicket, *wire.Error) {
	now := time.Now()
	if we := a.overRate(now); we != nil {
		return nil, we
	}
	a.mu.Lock()
	if a.queue.Len() == 0 && float64(a.inflight) < a.limit {
		a.inflight++
		a.mu.Unlock()
		return a.admitted(now), nil
	}
	w := &loginWaiter{ready: make(chan struct{})}
	e := a.queue.PushBack(w)
	a.mu.Unlock()

	var gone <-chan struct{}
	if queued != nil {
		gone = queued()
	}
	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case <-w.ready:
		return a.admitted(time.Now()), nil
	case <-t.C:
	case <-gone:
	}
	a.mu.Lock()
	if w.granted { // granted as the wait ended
		a.mu.Unlock()
		tk := a.admitted(time.Now())
		select {
		case <-gone:
			tk.done(false)
			return nil, nil
		default:
			return tk, nil
		}
	}
	a.queue.Remove(e)
	hint := a.retryHintLocked(time.Now(), minRetryHint)
	a.mu.Unlock()
	select {
	case <-gone:
		return nil, nil
	default:
	}
	a.m.refused.WithLabelValues("concurrency").Inc()
	return nil, &wire.Error{Code: pb.ErrorCode_UNAVAILABLE, Fatal: true, RetryAfterMs: hint,
		Message: "this gateway is admitting as many logins as it can serve now; retry after retry_after_ms"}
}

func (a *admission) admitted(at time.Time) *loginTicket {
	a.m.admitted.Inc()
	return &loginTicket{a: a, at: at}
}

// overRate takes a token of the rate bucket, or returns the refusal.
func (a *admission) overRate(now time.Time) *wire.Error {
	if a.bucket == nil {
		return nil
	}
	r := a.bucket.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d <= 0 {
		return nil
	}
	r.CancelAt(now)
	a.mu.Lock()
	hint := a.retryHintLocked(now, d)
	a.mu.Unlock()
	a.m.refused.WithLabelValues("rate").Inc()
	return &wire.Error{Code: pb.ErrorCode_UNAVAILABLE, Fatal: true, RetryAfterMs: hint,
		Message: "this gateway is admitting logins at its rate limit; retry after retry_after_ms"}
}

// retryHintLocked is the retry_after_ms of a login refused at now that
// cannot get in before earliest: the next free return time, at least
// minRetryHint away, plus jitter. Each refusal takes a return time and
// moves the next one on by the gateway's admission pace (pace), so the
// refused come back spread over the wait their number makes.
func (a *admission) retryHintLocked(now time.Time, earliest time.Duration) uint32 {
	pace := a.paceLocked()
	at := now.Add(max(earliest, minRetryHint))
	if a.nextReturn.After(at) {
		at = a.nextReturn
	}
	a.nextReturn = at.Add(pace)
	wait := min(at.Sub(now), maxRetryHint)
	spread := pace + wait/10
	return uint32((wait + time.Duration(a.jitter(int64(spread)))) / time.Millisecond)
}

// paceLocked is the time between two logins the gateway admits at its
// current limit and latency, or at its rate if that is slower.
func (a *admission) paceLocked() time.Duration {
	lat := a.latency
	if lat <= 0 {
		lat = defaultLoginLatency
	}
	pace := time.Duration(float64(lat) / a.limit)
	if a.bucket != nil {
		pace = max(pace, time.Duration(float64(time.Second)/float64(a.bucket.Limit())))
	}
	return max(pace, time.Microsecond)
}

// done gives the slot back (once); measured logins (past the token check)
// feed the average latency.
func (t *loginTicket) done(measured bool) {
	t.once.Do(func() { t.a.release(time.Since(t.at), measured) })
}

// release ends a login that took lat and hands the freed slot to the
// oldest waiter.
func (a *admission) release(lat time.Duration, measured bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if measured {
		lat = max(lat, time.Microsecond)
		if a.latency == 0 {
			a.latency = lat
		} else {
			a.latency = time.Duration((1-latencyWeight)*float64(a.latency) + latencyWeight*float64(lat))
		}
	}
	a.inflight--
	a.grantLocked()
}

// grantLocked hands free slots to the oldest waiters.
func (a *admission) grantLocked() {
	for a.queue.Len() > 0 && float64(a.inflight) < a.limit {
		w := a.queue.Remove(a.queue.Front()).(*loginWaiter)
		w.granted = true
		a.inflight++
		close(w.ready)
	}
}

// scale sets the limit to level (0 to 1) of the way from the floor to
// the ceiling (livesteer.go); a raised limit admits waiters at once.
func (a *admission) scale(level float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.limit = math.Round(a.floor + max(0, min(1, level))*(a.ceiling-a.floor))
	a.m.limit.Set(a.limit)
	a.grantLocked()
}

// currentLimit is the limit now (tests, the gauge).
func (a *admission) currentLimit() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limit
}
