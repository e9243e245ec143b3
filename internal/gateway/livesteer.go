package gateway

import (
	"context"
	"math"
	"sync/atomic"
	"time"
)

// Live first, end to end: the gateway measures how late live messages
// are and holds back the catch-up work it starts while they are late.
//
// Two measures, each a signal:
//
//   - the live delay: from the millisecond in a message's msg_id (minted
//     by the fanout as it stores the message) to its live announcement
//     reaching this gateway: the Postgres commit, the INBOX publishes,
//     the live subject;
//   - the send time: from a send's arrival at this gateway to its STORED
//     result (the SEND publish, the fanout's fetch and lookups, the same
//     commit and publishes).
//
// A login storm slows both because everything on the box shares its
// cores: the catch-up page reads (NATS fetches, Postgres body lookups,
// encoding) and the logins (consumers, summaries) compete with the live
// messages' hops, and no queue inside one process can put those first.
// So the gateway steers what it starts itself: how many catch-up page
// reads run at once (the page gate, pageSlots at most) and how many logins
// are in progress (the login limit, admission.go).
//
// Every steerTick each signal's mean of the tick is compared with its
// baseline, the least tick mean of the last baselineWindow: what the path
// takes when nothing competes with it (a clock difference between the
// fanout's box and this one is in both, so it cancels). Either over its
// baseline by more than the target (LiveDelayTarget): the level halves.
// Otherwise, or when no live message arrived and no send ended (nothing
// to protect: a storm alone goes at full speed), it grows by levelStep.
// The level, 0 to 1, sets the page gate between minPageSlots and
// pageSlots and the login limit between its floor and LoginConcurrency.
// Additive increase, multiplicative decrease: a congested path is
// relieved within a few ticks and the catch-up comes back gradually; the
// floors (4 page reads, 16 logins) keep the catch-up moving whatever the
// live path does.
const (
	steerTick      = 100 * time.Millisecond
	baselineWindow = 5 * time.Minute
	baselineBucket = 5 * time.Second
	levelStep      = 0.05 // 2 s from the floor to the full budget
	levelDecrease  = 0.5
	// minPageSlots is the page gate at level 0: the steering takes at
	// most three quarters of the catch-up's page reads. Measured
	// (commit 232d24b), 3,000 × 200 beside
	// 200 live msgs/s: a floor of 1 cut the live p99 from 900-980 ms to
	// 500-610 ms but doubled the drain (37-42 s to 79-85 s); a floor of 4
	// gave 670 ms for a drain of 43-47 s.
	minPageSlots = 4
)

// Signals of the steering.
const (
	sigLive = iota // the live delay
	sigSend        // the send time
	signals
)

// liveSteer is one gateway's live-first steering.
type liveSteer struct {
	target time.Duration // 0: off (the full budget always)
	apply  func(level float64)
	sig    [signals]signal
	level  float64
	bucket int // the baseline bucket of the current ticks (every signal's)
	ticks  int // ticks in it
}

// signal is one measure: this tick's samples and its baseline.
type signal struct {
	sum atomic.Int64 // this tick's samples, in ns
	n   atomic.Int64 // and how many

	buckets [int(baselineWindow / baselineBucket)]time.Duration // least tick mean per bucket
	filled  [int(baselineWindow / baselineBucket)]bool          // and whether it has one
}

func newLiveSteer(target time.Duration, apply func(level float64)) *liveSteer {
	return &liveSteer{target: target, apply: apply, level: 1}
}

// observe records one sample of signal sig (a negative live delay: the
// fanout's clock is ahead; still a sample, the baseline has the same
// offset).
func (l *liveSteer) observe(sig int, d time.Duration) {
	l.sig[sig].sum.Add(int64(d))
	l.sig[sig].n.Add(1)
}

// run ticks until ctx ends.
func (l *liveSteer) run(ctx context.Context) {
	if l.target <= 0 {
		return
	}
	t := time.NewTicker(steerTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.tick()
		}
	}
}

// tick takes the tick's samples, moves the baselines and the level, and
// applies the level.
func (l *liveSteer) tick() {
	late := false
	for i := range l.sig {
		late = l.sig[i].tick(l.bucket, l.target) || late
	}
	if l.ticks++; l.ticks >= int(baselineBucket/steerTick) {
		l.ticks = 0
		l.bucket = (l.bucket + 1) % len(l.sig[0].buckets)
		for i := range l.sig {
			l.sig[i].filled[l.bucket] = false
		}
	}
	switch {
	case late:
		l.level *= levelDecrease
		if l.level < 0.01 {
			l.level = 0
		}
		l.apply(l.level)
	case l.level < 1:
		l.level = min(1, l.level+levelStep)
		l.apply(l.level)
	}
}

// tick takes the signal's samples of the tick, keeps their mean in bucket
// if it is the least there, and reports whether it is over the baseline
// by more than target.
func (s *signal) tick(bucket int, target time.Duration) bool {
	n := s.n.Swap(0)
	sum := s.sum.Swap(0)
	if n == 0 {
		return false
	}
	mean := time.Duration(sum / n)
	base, ok := s.baseline()
	if !s.filled[bucket] || mean < s.buckets[bucket] {
		s.buckets[bucket], s.filled[bucket] = mean, true
	}
	return ok && mean > base+target
}

// baseline is the least tick mean of the window (false: none yet).
func (s *signal) baseline() (time.Duration, bool) {
	least, ok := time.Duration(math.MaxInt64), false
	for i, b := range s.buckets {
		if s.filled[i] && b < least {
			least, ok = b, true
		}
	}
	return least, ok
}

// steerLevel maps a level to the page gate's slots and the login limit.
func (g *Gateway) steerLevel(level float64) {
	slots := minPageSlots + int(math.Round(level*float64(pageSlots-minPageSlots)))
	g.pageGate.resize(slots)
	g.metrics.pageSlots.Set(float64(slots))
	g.admit.scale(level)
	g.metrics.steerLevel.Set(level)
}
