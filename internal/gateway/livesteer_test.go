package gateway

import (
	"testing"
	"time"
)

// steerTest is a liveSteer whose applied levels are recorded.
func steerTest(target time.Duration) (*liveSteer, *[]float64) {
	var applied []float64
	l := newLiveSteer(target, func(level float64) { applied = append(applied, level) })
	return l, &applied
}

// tickWith gives l one tick with n live delays of d (none when n is 0).
func tickWith(l *liveSteer, n int, d time.Duration) float64 {
	for range n {
		l.observe(sigLive, d)
	}
	l.tick()
	return l.level
}

// Live messages later than the baseline by more than the target halve the
// level each tick, down to 0; on time, or with no live message at all,
// the level grows back by levelStep a tick, up to 1. Each change is
// applied.
func TestLiveSteerHalvesWhenLateAndRecovers(t *testing.T) {
	const target = 20 * time.Millisecond
	l, applied := steerTest(target)
	for i := range 20 {
		if lv := tickWith(l, 10, 3*time.Millisecond); lv != 1 {
			t.Fatalf("tick %d on time: level %v, want 1", i, lv)
		}
	}
	if len(*applied) != 0 {
		t.Fatalf("levels applied while nothing changed: %v", *applied)
	}
	// Within the target: no change.
	if lv := tickWith(l, 10, 3*time.Millisecond+target-time.Millisecond); lv != 1 {
		t.Fatalf("a tick within the target: level %v, want 1", lv)
	}
	want := 1.0
	for i := range 8 {
		want *= levelDecrease
		if want < 0.01 {
			want = 0
		}
		if lv := tickWith(l, 10, 3*time.Millisecond+target+5*time.Millisecond); lv != want {
			t.Fatalf("late tick %d: level %v, want %v", i, lv, want)
		}
	}
	if got := (*applied)[len(*applied)-1]; got != 0 {
		t.Fatalf("applied %v last, want 0", got)
	}
	// Back on time: up by levelStep a tick.
	if lv := tickWith(l, 10, 3*time.Millisecond); lv != levelStep {
		t.Fatalf("first tick back on time: level %v, want %v", lv, levelStep)
	}
	// No live messages: nothing to protect, up to 1.
	for range int(1/levelStep) + 2 {
		tickWith(l, 0, 0)
	}
	if l.level != 1 || (*applied)[len(*applied)-1] != 1 {
		t.Fatalf("after ticks without live messages the level is %v (applied %v), want 1", l.level, (*applied)[len(*applied)-1])
	}
}

// The baseline is the least tick mean of the last baselineWindow, clock
// skew included: a box whose clock is 100 ms ahead of the sender's (every
// delay negative) is steered like any other, and an old fast spell leaves
// the window.
func TestLiveSteerBaselineWindow(t *testing.T) {
	const target = 20 * time.Millisecond
	l, _ := steerTest(target)
	skew := -100 * time.Millisecond
	for range 10 {
		tickWith(l, 5, skew+3*time.Millisecond)
	}
	if b, ok := l.sig[sigLive].baseline(); !ok || b != skew+3*time.Millisecond {
		t.Fatalf("baseline %v %v, want %v", b, ok, skew+3*time.Millisecond)
	}
	if lv := tickWith(l, 5, skew+3*time.Millisecond+target+time.Millisecond); lv != levelDecrease {
		t.Fatalf("late by more than the target with negative delays: level %v, want %v", lv, levelDecrease)
	}

	// A whole window of ticks at 10 ms: the old baseline is gone.
	m, _ := steerTest(target)
	tickWith(m, 5, time.Millisecond)
	for range int(baselineWindow / steerTick) {
		tickWith(m, 5, 10*time.Millisecond)
	}
	if b, _ := m.sig[sigLive].baseline(); b != 10*time.Millisecond {
		t.Fatalf("baseline %v a window after the 1 ms tick, want 10ms", b)
	}
}

// The level sets the page gate from minPageSlots to pageSlots and the login
// limit from its floor to LoginConcurrency.
func TestSteerLevelSetsPageSlotsAndLoginLimit(t *testing.T) {
	g := loginTestGateway(nil)
	g.pageGate = newPageGate(pageSlots)
	for _, c := range []struct {
		level        float64
		slots, limit int
	}{{0, minPageSlots, loginFloor}, {0.5, 10, 264}, {1, pageSlots, 512}} {
		g.steerLevel(c.level)
		g.pageGate.mu.Lock()
		slots := g.pageGate.slots
		g.pageGate.mu.Unlock()
		if slots != c.slots || g.admit.currentLimit() != float64(c.limit) {
			t.Fatalf("level %v: %d page slots, login limit %v; want %d and %d", c.level, slots, g.admit.currentLimit(), c.slots, c.limit)
		}
	}
}

// Each signal has its own baseline: sends slow by more than the target
// halve the level while live delays are on time, and the other way round.
func TestLiveSteerEitherSignalLate(t *testing.T) {
	const target = 20 * time.Millisecond
	l, _ := steerTest(target)
	for range 10 {
		l.observe(sigLive, 2*time.Millisecond)
		l.observe(sigSend, 6*time.Millisecond)
		l.tick()
	}
	// Sends late, live on time.
	l.observe(sigLive, 2*time.Millisecond)
	l.observe(sigSend, 6*time.Millisecond+target+time.Millisecond)
	if l.tick(); l.level != levelDecrease {
		t.Fatalf("sends late: level %v, want %v", l.level, levelDecrease)
	}
	// A live delay of 20 ms is within the send baseline plus the target,
	// but over the live one.
	l.observe(sigLive, 2*time.Millisecond+target+time.Millisecond)
	l.observe(sigSend, 6*time.Millisecond)
	if l.tick(); l.level != levelDecrease*levelDecrease {
		t.Fatalf("live late: level %v, want %v", l.level, levelDecrease*levelDecrease)
	}
}
