package client

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// orderHarness drives an order with a clock of its own and records what
// release decides, as "deliver c1#3", "late c1#2", "newest c1#8",
// "dup c1#2", "again c1#8" (the drain reached a newest one) and
// "pull c1 (2,5)".
type orderHarness struct {
	t      *testing.T
	o      *order
	now    time.Time
	s      *session
	refuse map[string]bool // "c1#3": the handler refuses it once
}

func newHarness(t *testing.T, opts Options) *orderHarness {
	opts.setDefaults()
	return &orderHarness{t: t, o: newOrder(opts), now: time.Unix(1_000_000, 0), s: &session{}, refuse: map[string]bool{}}
}

func (h *orderHarness) message(lane string, conv, convSeq int64) Message {
	return Message{Seq: uint64(convSeq), MsgID: conv*1000 + convSeq, ConvID: conv, ConvSeq: convSeq, Lane: lane}
}

// arrive buffers messages of conv arriving on lane (live, backfill, newest
// or pull) now; lane "expired" is backfill entries whose body retention
// removed.
func (h *orderHarness) arrive(lane string, conv int64, seqs ...int64) {
	h.arriveExpired(lane, conv, 0, seqs...)
}

// arriveExpired is arrive with the retention horizon the batch (or the
// pull) reports for conv (0: none).
func (h *orderHarness) arriveExpired(lane string, conv, expiredUpTo int64, seqs ...int64) {
	b := &batchTrack{s: h.s, size: len(seqs)}
	if expiredUpTo > 0 && lane != "pull" {
		h.o.expire(conv, expiredUpTo)
	}
	var pulled []Message
	for _, cs := range seqs {
		m := h.message(lane, conv, cs)
		switch lane {
		case "newest":
			h.o.addNewest(pendingMsg{m: m, b: b, arrived: h.now})
		case "pull":
			pulled = append(pulled, m)
		case "expired":
			m.Lane = "backfill"
			h.o.add(pendingMsg{m: m, b: b, arrived: h.now, expired: true})
		default:
			h.o.add(pendingMsg{m: m, b: b, arrived: h.now})
		}
	}
	if lane == "pull" {
		h.o.addPulled(conv, pulled, false, expiredUpTo, h.now)
	}
	if lane == "backfill" || lane == "newest" || lane == "expired" {
		h.o.lastBackfill = h.now
	}
}

// release runs release and returns its decisions.
func (h *orderHarness) release() []string {
	var got []string
	h.o.release(h.now, func(st step) bool {
		if st.kind == stepPull {
			got = append(got, fmt.Sprintf("pull c%d (%d,%d)", st.conv, st.after, st.before))
			return true
		}
		name := fmt.Sprintf("c%d#%d", st.p.m.ConvID, st.p.m.ConvSeq)
		verb := map[stepKind]string{stepDeliver: "deliver", stepLate: "late", stepNewest: "newest",
			stepDuplicate: "dup", stepNewestAgain: "again", stepExpired: "expired"}[st.kind]
		if st.kind == stepLate || st.kind == stepNewest {
			if want := st.kind == stepLate || st.p.m.ConvSeq <= h.o.convs[st.p.m.ConvID].hwm; st.p.m.Late != want {
				h.t.Errorf("%s %s: Late %v", verb, name, st.p.m.Late)
			}
		} else if st.p.m.Late {
			h.t.Errorf("%s %s: flagged Late", verb, name)
		}
		if h.refuse[name] && (st.kind == stepDeliver || st.kind == stepLate || st.kind == stepNewest) {
			delete(h.refuse, name)
			got = append(got, "refused "+name)
			return false
		}
		got = append(got, verb+" "+name)
		return true
	})
	return got
}

// TestOrderRelease pins the ordering buffer's decisions: dedupe by msg_id
// and by conv_seq, order by conv_seq, when a gap is given up on, the gap
// fill by pull, the newest page, and what happens to what a release passed
// over (Late, never dropped, never twice).
func TestOrderRelease(t *testing.T) {
	type ev struct {
		wait  time.Duration // the clock moves first
		idle  *bool         // the backfill is done (true) or running (false)
		lane  string        // live, backfill, newest, pull; "" only releases
		conv  int64
		seqs  []int64
		want  []string // release's decisions after this event
		drop  bool     // the session ends (its unconfirmed entries are dropped)
		refus string   // the handler refuses this message once
		exp   int64    // the batch (or pull) reports conv's retention horizon
	}
	yes, no := true, false
	d := func(s ...string) []string { return s }
	cases := []struct {
		name   string
		opts   Options
		script []ev
	}{
		{name: "reordered arrival handed over in conv_seq order", script: []ev{
			{lane: "backfill", conv: 1, seqs: []int64{3, 1, 2}, want: d("deliver c1#1", "deliver c1#2", "deliver c1#3")},
		}},
		{name: "repeat dropped by msg_id", script: []ev{
			{lane: "backfill", conv: 1, seqs: []int64{1, 2}, want: d("deliver c1#1", "deliver c1#2")},
			{lane: "live", conv: 1, seqs: []int64{2}, want: d("dup c1#2")},
		}},
		{name: "repeat after dedupe eviction known by conv_seq", opts: Options{DedupeSize: 1}, script: []ev{
			{lane: "backfill", conv: 1, seqs: []int64{1, 2, 3}, want: d("deliver c1#1", "deliver c1#2", "deliver c1#3")},
			{lane: "backfill", conv: 1, seqs: []int64{1, 2}, want: d("dup c1#1", "dup c1#2")},
		}},
		{name: "backfill gap final for a conversation first seen; what it passed comes Late, once", opts: Options{DedupeSize: 1}, script: []ev{
			{lane: "backfill", conv: 1, seqs: []int64{3}, want: d("deliver c1#3")},
			{lane: "backfill", conv: 1, seqs: []int64{1, 2}, want: d("late c1#1", "late c1#2")},
			{lane: "backfill", conv: 1, seqs: []int64{1, 2, 3}, want: d("dup c1#1", "dup c1#2", "dup c1#3")},
		}},
		{name: "live gap waits for the running backfill", script: []ev{
			{idle: &no, lane: "live", conv: 1, seqs: []int64{2}, want: nil},
			{wait: time.Second, want: nil},
			{lane: "backfill", conv: 1, seqs: []int64{1}, want: d("deliver c1#1", "deliver c1#2")},
		}},
		{name: "live gap released GapWait after the backfill is done", opts: Options{GapWait: 100 * time.Millisecond}, script: []ev{
			{idle: &yes, lane: "live", conv: 1, seqs: []int64{5}, want: nil},
			{wait: 50 * time.Millisecond, want: nil},
			{wait: 50 * time.Millisecond, want: d("deliver c1#5")},
		}},
		{name: "live gap held at most maxGapHold by a stalled backfill; what it passed comes Late", script: []ev{
			{idle: &no, lane: "live", conv: 1, seqs: []int64{3}, want: nil},
			{wait: maxGapHold - time.Second, want: nil},
			{wait: time.Second, want: d("deliver c1#3")},
			{lane: "backfill", conv: 1, seqs: []int64{1, 2}, want: d("late c1#1", "late c1#2")},
			{lane: "live", conv: 1, seqs: []int64{4}, want: d("deliver c1#4")},
		}},
		{name: "gap in a followed conversation filled by pull", opts: Options{LastConvSeq: func(int64) int64 { return 2 }}, script: []ev{
			{lane: "backfill", conv: 1, seqs: []int64{5}, want: d("pull c1 (2,5)")},
			{wait: time.Second, want: nil}, // the pull runs
			{lane: "pull", conv: 1, seqs: []int64{3, 4}, want: d("deliver c1#3", "deliver c1#4", "deliver c1#5")},
			{lane: "backfill", conv: 1, seqs: []int64{3, 4}, want: d("dup c1#3", "dup c1#4")},
		}},
		{name: "what the pull did not find is released; if it comes later it is Late", opts: Options{LastConvSeq: func(int64) int64 { return 2 }}, script: []ev{
			{lane: "backfill", conv: 1, seqs: []int64{5}, want: d("pull c1 (2,5)")},
			{lane: "pull", conv: 1, seqs: []int64{3}, want: d("deliver c1#3", "deliver c1#5")},
			{lane: "live", conv: 1, seqs: []int64{4}, want: d("late c1#4")},
		}},
		{name: "below LastConvSeq the application decides (Delivered)", opts: Options{
			LastConvSeq: func(int64) int64 { return 5 }, Delivered: func(id int64) bool { return id == 1002 }}, script: []ev{
			{lane: "backfill", conv: 1, seqs: []int64{2, 3, 6}, want: d("dup c1#2", "late c1#3", "deliver c1#6")},
		}},
		{name: "newest page first, the drain skips it and moves past it", opts: Options{LastConvSeq: func(c int64) int64 { return map[int64]int64{1: 2}[c] }}, script: []ev{
			{idle: &no, lane: "newest", conv: 1, seqs: []int64{8, 9}, want: d("newest c1#8", "newest c1#9")},
			{lane: "newest", conv: 2, seqs: []int64{4}, want: d("newest c2#4")},
			{lane: "live", conv: 1, seqs: []int64{10}, want: nil}, // after the newest page, before the drain: waits
			{lane: "backfill", conv: 1, seqs: []int64{3, 4, 5, 6, 7}, want: d("deliver c1#3", "deliver c1#4", "deliver c1#5", "deliver c1#6", "deliver c1#7")},
			{lane: "backfill", conv: 2, seqs: []int64{1, 2, 3}, want: d("deliver c2#1", "deliver c2#2", "deliver c2#3")},
			{lane: "backfill", conv: 1, seqs: []int64{8, 9}, want: d("again c1#8", "again c1#9", "deliver c1#10")},
			{lane: "backfill", conv: 2, seqs: []int64{4}, want: d("again c2#4")},
			{lane: "live", conv: 2, seqs: []int64{5}, want: d("deliver c2#5")},
		}},
		{name: "newest page sent again after a reconnect", script: []ev{
			{lane: "newest", conv: 1, seqs: []int64{8}, want: d("newest c1#8")},
			{drop: true},
			{lane: "newest", conv: 1, seqs: []int64{8}, want: d("dup c1#8")},
		}},
		{name: "newest message passed over by a gap release stays known", opts: Options{DedupeSize: 1}, script: []ev{
			{lane: "newest", conv: 1, seqs: []int64{5}, want: d("newest c1#5")},
			{lane: "backfill", conv: 1, seqs: []int64{7}, want: d("deliver c1#7")},
			{lane: "backfill", conv: 1, seqs: []int64{5, 6}, want: d("dup c1#5", "late c1#6")},
		}},
		{name: "backfill past an expired range goes on in order without a pull", opts: Options{LastConvSeq: func(int64) int64 { return 2 }}, script: []ev{
			{lane: "backfill", conv: 1, exp: 10, seqs: []int64{11, 12}, want: d("deliver c1#11", "deliver c1#12")},
			{lane: "live", conv: 1, seqs: []int64{13}, want: d("deliver c1#13")},
		}},
		{name: "without the expired range the same backfill waits for a pull", opts: Options{LastConvSeq: func(int64) int64 { return 2 }}, script: []ev{
			{lane: "backfill", conv: 1, seqs: []int64{11, 12}, want: d("pull c1 (2,11)")},
		}},
		{name: "a live message after an expired range waits for nothing", opts: Options{LastConvSeq: func(int64) int64 { return 2 }}, script: []ev{
			{idle: &no, lane: "backfill", conv: 1, exp: 10, want: nil},
			{lane: "live", conv: 1, seqs: []int64{11}, want: d("deliver c1#11")},
		}},
		{name: "expired entries are confirmed and passed over, never handed over", script: []ev{
			{lane: "backfill", conv: 1, seqs: []int64{1}, want: d("deliver c1#1")},
			{lane: "expired", conv: 1, seqs: []int64{2, 3}, want: d("expired c1#2", "expired c1#3")},
			{lane: "backfill", conv: 1, seqs: []int64{4}, want: d("deliver c1#4")},
			{lane: "expired", conv: 1, seqs: []int64{3}, want: d("dup c1#3")},
		}},
		{name: "a conversation not followed yet ignores the range; its first message goes", script: []ev{
			{lane: "backfill", conv: 1, exp: 10, seqs: []int64{14}, want: d("deliver c1#14")},
		}},
		{name: "a message of an expired range that comes anyway is handed over Late", opts: Options{LastConvSeq: func(int64) int64 { return 2 }}, script: []ev{
			{lane: "backfill", conv: 1, exp: 10, seqs: []int64{11}, want: d("deliver c1#11")},
			{lane: "live", conv: 1, seqs: []int64{9, 10}, want: d("late c1#9", "late c1#10")},
		}},
		{name: "a gap fill stops at the horizon its pull reports", opts: Options{LastConvSeq: func(int64) int64 { return 2 }}, script: []ev{
			{lane: "live", conv: 1, seqs: []int64{12}, idle: &yes, wait: 0, want: nil},
			{wait: time.Second, want: d("pull c1 (2,12)")},
			{lane: "pull", conv: 1, exp: 10, seqs: []int64{11}, want: d("deliver c1#11", "deliver c1#12")},
		}},
		{name: "refused message stays and is offered again", script: []ev{
			{refus: "c1#2", lane: "backfill", conv: 1, seqs: []int64{1, 2, 3}, want: d("deliver c1#1", "refused c1#2")},
			{want: d("deliver c1#2", "deliver c1#3")},
		}},
		{name: "a session's unconfirmed entries are dropped with it, pulled ones stay", opts: Options{LastConvSeq: func(int64) int64 { return 1 }}, script: []ev{
			{lane: "backfill", conv: 1, seqs: []int64{4}, want: d("pull c1 (1,4)")},
			{refus: "c1#2", lane: "pull", conv: 1, seqs: []int64{2, 3}, want: d("refused c1#2")},
			{drop: true, want: d("deliver c1#2", "deliver c1#3")},
			{lane: "backfill", conv: 1, seqs: []int64{4}, want: d("deliver c1#4")},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.opts)
			for i, e := range tc.script {
				h.now = h.now.Add(e.wait)
				if e.idle != nil {
					h.o.idle = *e.idle
				}
				if e.refus != "" {
					h.refuse[e.refus] = true
				}
				if e.drop {
					h.o.dropSession(h.s)
					h.s = &session{}
				}
				if e.lane != "" {
					h.arriveExpired(e.lane, e.conv, e.exp, e.seqs...)
				}
				if got := h.release(); !slices.Equal(got, e.want) {
					t.Fatalf("event %d (%s c%d %v): release decided %q, want %q", i, e.lane, e.conv, e.seqs, got, e.want)
				}
			}
		})
	}
}

// TestOrderRandomInterleavings: whatever the arrival (messages repeated on
// the wire, reordered, split over lanes, a newest page, sessions that end,
// a tiny dedupe set), once every message arrived and the gap timers ran
// out each message was handed over exactly once, and within a conversation
// every message not flagged (newest, Late) came in conv_seq order.
func TestOrderRandomInterleavings(t *testing.T) {
	for trial := range 500 {
		rng := rand.New(rand.NewPCG(uint64(trial), 7))
		h := newHarness(t, Options{DedupeSize: 1 + rng.IntN(4), GapWait: 100 * time.Millisecond})
		const convs, perConv = 3, 12
		type arrival struct {
			lane     string
			conv, cs int64
		}
		var arrivals []arrival
		for c := int64(1); c <= convs; c++ {
			for cs := int64(1); cs <= perConv; cs++ {
				for range 1 + rng.IntN(3) {
					lane := []string{"live", "backfill", "backfill", "newest"}[rng.IntN(4)]
					arrivals = append(arrivals, arrival{lane, c, cs})
				}
			}
		}
		rng.Shuffle(len(arrivals), func(i, j int) { arrivals[i], arrivals[j] = arrivals[j], arrivals[i] })

		handed := map[int64]int{}
		last := map[int64]int64{} // highest conv_seq handed over unflagged
		top := map[int64]int64{}  // highest conv_seq handed over
		var log []string
		var pulls []step
		act := func(st step) bool {
			if st.kind == stepPull {
				pulls = append(pulls, st)
				return true
			}
			m := st.p.m
			switch st.kind {
			case stepDeliver, stepLate, stepNewest:
				handed[m.MsgID]++
				log = append(log, fmt.Sprintf("%s c%d#%d", m.Lane, m.ConvID, m.ConvSeq))
				if m.Lane != "newest" && !m.Late {
					if m.ConvSeq <= last[m.ConvID] {
						t.Fatalf("trial %d: c%d#%d handed over after #%d unflagged; %v", trial, m.ConvID, m.ConvSeq, last[m.ConvID], log)
					}
					last[m.ConvID] = m.ConvSeq
				}
				if m.Late && m.ConvSeq > top[m.ConvID] {
					t.Fatalf("trial %d: c%d#%d flagged Late, but nothing after it was handed over", trial, m.ConvID, m.ConvSeq)
				}
				top[m.ConvID] = max(top[m.ConvID], m.ConvSeq)
			}
			return true
		}
		step := func(d time.Duration) {
			h.now = h.now.Add(d)
			h.o.release(h.now, act)
			for _, p := range pulls { // the timeline holds every message
				var got []Message
				for cs := p.after + 1; cs < p.before; cs++ {
					got = append(got, h.message("pull", p.conv, cs))
				}
				h.o.addPulled(p.conv, got, false, 0, h.now)
			}
			pulls = nil
		}
		for i := 0; i < len(arrivals); i++ {
			a := arrivals[i]
			h.o.idle = i > len(arrivals)/2
			h.arrive(a.lane, a.conv, a.cs)
			if rng.IntN(20) == 0 {
				// The session ends: what it had not handed over comes again
				// on the next one.
				again := func(p pendingMsg) {
					if p.b != nil && p.b.s == h.s {
						arrivals = append(arrivals, arrival{p.m.Lane, p.m.ConvID, p.m.ConvSeq})
					}
				}
				for _, p := range h.o.newest {
					again(p)
				}
				for _, cb := range h.o.convs {
					for _, p := range cb.pending {
						again(p)
					}
				}
				h.o.dropSession(h.s)
				h.s = &session{}
			}
			step(time.Duration(rng.IntN(30)) * time.Millisecond)
		}
		for range 5 {
			step(maxGapHold)
		}
		for c := int64(1); c <= convs; c++ {
			for cs := int64(1); cs <= perConv; cs++ {
				if n := handed[c*1000+cs]; n != 1 {
					t.Fatalf("trial %d: c%d#%d handed over %d times; %v", trial, c, cs, n, log)
				}
			}
		}
	}
}

func TestSeqRanges(t *testing.T) {
	var rs seqRanges
	rs.add(5, 7)
	rs.add(1, 2)
	rs.add(3, 4) // touches both: one range
	rs.add(10, 12)
	if want := (seqRanges{{1, 7}, {10, 12}}); !slices.Equal(rs, want) {
		t.Fatalf("after adds: %v, want %v", rs, want)
	}
	rs.remove(4)
	rs.remove(10)
	if want := (seqRanges{{1, 3}, {5, 7}, {11, 12}}); !slices.Equal(rs, want) {
		t.Fatalf("after removes: %v, want %v", rs, want)
	}
	for x, want := range map[int64]bool{0: false, 1: true, 3: true, 4: false, 6: true, 8: false, 10: false, 12: true, 13: false} {
		if rs.has(x) != want {
			t.Errorf("has(%d) = %v", x, !want)
		}
	}
	rs.removeUpTo(6)
	if want := (seqRanges{{7, 7}, {11, 12}}); !slices.Equal(rs, want) {
		t.Fatalf("after removeUpTo(6): %v, want %v", rs, want)
	}
}
