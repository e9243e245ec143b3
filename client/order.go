package client

import (
	"cmp"
	"slices"
	"time"
)

// order is the receive side's bookkeeping: which messages were handed over
// (dedupe by msg_id, and exactly by conv_seq below each conversation's
// high-water mark), the per-conversation buffer by conv_seq, and when a gap
// is given up on. It does no I/O, starts nothing and has no lock: the
// receiver feeds it (add, addNewest, addPulled, dropSession) and asks it
// what to do next (release), so the ordering rules are tested with a clock
// of the test's own.
type order struct {
	seen   *idSet
	convs  map[int64]*convBuf
	newest []pendingMsg // a newest page's messages not handed over yet, in arrival order

	gapWait      time.Duration // a live message waits this long after the backfill is done
	gapHold      time.Duration // and at most this long for a backfill that stopped moving
	idle         bool          // the server said the backfill is done
	lastBackfill time.Time     // when the last backfill batch arrived

	lastConvSeq func(convID int64) int64 // Options.LastConvSeq
	delivered   func(msgID int64) bool   // Options.Delivered
}

// convBuf is one conversation's ordering state.
//
// Every conv_seq in (base, hwm] was handed over (or the application said it
// had it), except those in passed; so a repeat there is known without the
// dedupe set, however long ago it was handed over.
type convBuf struct {
	hwm     int64     // the in-order high-water mark: highest conv_seq the in-order stream passed
	base    int64     // hwm at start, from LastConvSeq: at or below it only Delivered knows
	passed  seqRanges // conv_seqs at or below hwm skipped by a gap release, never handed over
	ahead   seqRanges // conv_seqs above hwm handed over from a newest page
	pending []pendingMsg
	pull    int   // gap fill by conversation pull: 0 none, 1 running, 2 done
	pullTo  int64 // the pull fills the conv_seqs below this one
}

type pendingMsg struct {
	m       Message
	b       *batchTrack // nil for a pulled message (not an inbox entry)
	arrived time.Time
	expired bool // retention removed its body: confirmed and passed over, never handed over
}

// stepKind is what release decided for a message.
type stepKind uint8

const (
	stepDeliver     stepKind = iota // hand over, next in conv_seq order
	stepLate                        // hand over, flagged Late: below the high-water mark, never handed over
	stepNewest                      // hand over at once: a newest page, ahead of order by design
	stepDuplicate                   // handed over before (or the application has it): confirm only
	stepNewestAgain                 // the drain reached a message a newest page handed over: confirm only
	stepExpired                     // an entry whose body retention removed: confirm only, its conv_seq is passed over
	stepPull                        // fill conv's gap (after, before) from the conversation timeline
)

// step is one decision of release.
type step struct {
	kind stepKind
	p    pendingMsg // the message (all kinds but stepPull)
	// stepPull: the conversation and the conv_seqs to fill, both ends excluded.
	conv, after, before int64
}

func newOrder(o Options) *order {
	return &order{
		seen: newIDSet(o.DedupeSize), convs: map[int64]*convBuf{},
		gapWait: o.GapWait, gapHold: maxGapHold,
		lastConvSeq: o.LastConvSeq, delivered: o.Delivered,
	}
}

func (o *order) conv(id int64) *convBuf {
	cb := o.convs[id]
	if cb == nil {
		cb = &convBuf{}
		if o.lastConvSeq != nil {
			cb.base = o.lastConvSeq(id)
			cb.hwm = cb.base
		}
		o.convs[id] = cb
	}
	return cb
}

// add buffers a message of the inbox (live or backfill lane).
func (o *order) add(p pendingMsg) {
	o.conv(p.m.ConvID).insert(p)
}

// addNewest queues a message of a newest page: it is handed over before
// anything else and does not take part in the conversation's order.
func (o *order) addNewest(p pendingMsg) {
	o.conv(p.m.ConvID)
	o.newest = append(o.newest, p)
}

// expire passes over conv's conv_seqs up to upTo, which retention removed
// (a batch's or a pull's expired range): nothing waits for them, and no
// pull asks for them. A conversation the client does not follow yet
// (high-water mark 0) needs nothing: its first message goes anyway. What
// comes later at or below upTo is handed over Late, like anything a gap
// release passed over.
func (o *order) expire(conv, upTo int64) {
	cb := o.conv(conv)
	if cb.hwm > 0 && upTo > cb.hwm {
		cb.passTo(upTo)
	}
}

// addPulled buffers the answer of a gap fill; partial says the pull gave up
// before it covered the gap (it is asked again); expiredUpTo is the
// conversation's retention horizon the pull reported.
func (o *order) addPulled(conv int64, msgs []Message, partial bool, expiredUpTo int64, now time.Time) {
	cb := o.convs[conv]
	if cb == nil {
		return // the conversation was dropped meanwhile
	}
	if expiredUpTo > 0 {
		o.expire(conv, expiredUpTo)
	}
	if cb.pull == 1 {
		cb.pull = 2
		if partial {
			cb.pull = 0
		}
	}
	for _, m := range msgs {
		cb.insert(pendingMsg{m: m, arrived: now})
	}
}

func (cb *convBuf) insert(p pendingMsg) {
	i, _ := slices.BinarySearchFunc(cb.pending, p.m.ConvSeq, func(q pendingMsg, s int64) int { return cmp.Compare(q.m.ConvSeq, s) })
	cb.pending = slices.Insert(cb.pending, i, p)
}

// dropSession forgets the unconfirmed inbox entries of session s (they
// come again on the next session). Pulled messages are no session's and
// stay.
func (o *order) dropSession(s *session) {
	ofS := func(p pendingMsg) bool { return p.b != nil && p.b.s == s }
	o.newest = slices.DeleteFunc(o.newest, ofS)
	for id, cb := range o.convs {
		cb.pending = slices.DeleteFunc(cb.pending, ofS)
		if len(cb.pending) == 0 && cb.hwm == 0 && len(cb.ahead) == 0 && cb.pull != 1 {
			delete(o.convs, id)
		}
	}
}

// handedOver reports whether m reached the application before: its msg_id
// is remembered, or its conv_seq is one the client accounted for, or the
// application says so.
func (o *order) handedOver(cb *convBuf, m Message) bool {
	if o.seen.has(m.MsgID) || cb.ahead.has(m.ConvSeq) {
		return true
	}
	if m.ConvSeq > cb.base && m.ConvSeq <= cb.hwm && !cb.passed.has(m.ConvSeq) {
		return true
	}
	return o.delivered != nil && o.delivered(m.MsgID)
}

// release decides, message by message, what goes to the application now,
// and calls act with each decision. act performs it and returns false when
// it could not (the handler failed): the message stays, and release stops.
// A newest page goes first; then, per conversation, every message that is
// next in conv_seq order, and those whose gap is given up on.
func (o *order) release(now time.Time, act func(step) bool) {
	for len(o.newest) > 0 {
		p := o.newest[0]
		cb := o.conv(p.m.ConvID)
		kind := stepNewest
		switch {
		case o.handedOver(cb, p.m):
			kind = stepDuplicate
		case p.expired:
			kind = stepExpired
		}
		if p.m.ConvSeq <= cb.hwm {
			p.m.Late = true
		}
		if !act(step{kind: kind, p: p}) {
			return
		}
		o.newest = o.newest[1:]
		if kind == stepNewest || kind == stepExpired {
			o.seen.add(p.m.MsgID)
			if p.m.ConvSeq > cb.hwm {
				cb.ahead.add(p.m.ConvSeq, p.m.ConvSeq)
			} else {
				cb.passed.remove(p.m.ConvSeq)
			}
		}
	}
	for id, cb := range o.convs {
		if !o.releaseConv(id, cb, now, act) {
			return
		}
	}
}

// releaseConv is release for one conversation.
//
// A message after a gap stands for its conv_seq in the conversation's
// order even when it is a repeat: the gap rules apply to it alike, and its
// release moves the high-water mark past it.
func (o *order) releaseConv(id int64, cb *convBuf, now time.Time, act func(step) bool) bool {
	for len(cb.pending) > 0 {
		p := cb.pending[0]
		if p.m.ConvSeq > cb.hwm+1 {
			release, pull := o.gapReleased(cb, p, now)
			if pull {
				cb.pull, cb.pullTo = 1, p.m.ConvSeq
				act(step{kind: stepPull, conv: id, after: cb.hwm, before: p.m.ConvSeq})
			}
			if !release {
				return true // hold it: earlier messages of the conversation may come
			}
		}
		kind := stepDeliver
		switch {
		case cb.ahead.has(p.m.ConvSeq):
			kind = stepNewestAgain
		case o.handedOver(cb, p.m):
			kind = stepDuplicate
		case p.expired:
			kind = stepExpired
		case p.m.ConvSeq <= cb.hwm:
			kind = stepLate
			p.m.Late = true
		}
		if !act(step{kind: kind, p: p}) {
			return false
		}
		cb.pending = cb.pending[1:]
		switch kind {
		case stepDeliver:
			o.seen.add(p.m.MsgID)
		case stepLate:
			o.seen.add(p.m.MsgID)
			cb.passed.remove(p.m.ConvSeq)
		case stepDuplicate:
			cb.passed.remove(p.m.ConvSeq) // the application has it (Delivered)
		case stepExpired:
			o.seen.add(p.m.MsgID)         // a repeat of it is confirmed again, not passed over twice
			cb.passed.remove(p.m.ConvSeq) // accounted for: it never comes with a body
		}
		if p.m.ConvSeq > cb.hwm {
			cb.advance(p.m.ConvSeq)
		}
	}
	return true
}

// advance moves the high-water mark to convSeq, which is handed over: what
// it passes over below it that was not handed over ahead is recorded as
// passed.
func (cb *convBuf) advance(convSeq int64) {
	cb.passTo(convSeq - 1)
	cb.ahead.removeUpTo(convSeq)
	cb.hwm = convSeq
	cb.pullBehind()
}

// passTo moves the high-water mark to x without handing anything over:
// every conv_seq up to x that was not handed over ahead is passed.
func (cb *convBuf) passTo(x int64) {
	lo := cb.hwm + 1
	for _, r := range cb.ahead {
		if r.lo > x {
			break
		}
		if r.lo > lo {
			cb.passed.add(lo, r.lo-1)
		}
		lo = max(lo, r.hi+1)
	}
	if lo <= x {
		cb.passed.add(lo, x)
	}
	cb.ahead.removeUpTo(x)
	cb.hwm = max(cb.hwm, x)
	cb.pullBehind()
}

// pullBehind forgets a gap fill whose gap is behind the high-water mark.
func (cb *convBuf) pullBehind() {
	if cb.pull == 2 && cb.hwm >= cb.pullTo {
		cb.pull = 0
	}
}

// gapReleased decides whether a message after a gap in its conversation
// goes now, and whether a gap fill should start for it.
//
//   - A gap on the backfill lane is final: backfill walks the inbox in
//     order, which within a conversation is conv_seq order, so the missing
//     numbers are not in this inbox (the user joined later, the device's
//     window starts later).
//   - A live message waits while the backfill runs (it may fill the gap)
//     and gapWait after it is done; at most gapHold once the backfill has
//     stopped moving (a device that waits for the server while the server
//     waits for its confirmation would wait for good).
//   - Then, in a conversation this client already follows (hwm > 0), the gap
//     may be a real hole (entries the inbox holds out of order after a
//     fault): it is filled from the conversation timeline first; what the
//     pull does not find (the user was not a member then) is not this
//     device's to have.
//   - Otherwise (the client's first message of that conversation) it goes.
//
// Whatever a release passes over and comes later is handed over flagged
// Late (see Message.Late).
func (o *order) gapReleased(cb *convBuf, p pendingMsg, now time.Time) (release, pull bool) {
	waited := now.Sub(p.arrived)
	stalled := waited >= o.gapHold && now.Sub(o.lastBackfill) >= o.gapHold
	if !stalled && p.m.Lane == "live" && !(o.idle && waited >= o.gapWait) {
		return false, false // the backfill, still running, may fill the gap
	}
	if cb.hwm == 0 {
		return true, false // the first message of the conversation here
	}
	switch {
	case cb.pull == 1:
		return false, false // the pull runs
	case cb.pull == 2 && p.m.ConvSeq <= cb.pullTo:
		return true, false // what the pull did not find is not this device's
	}
	return false, true
}

// seqRange is the conv_seqs lo..hi, both included.
type seqRange struct{ lo, hi int64 }

// seqRanges is a set of conv_seqs as sorted, disjoint, non-adjacent ranges.
type seqRanges []seqRange

func (rs seqRanges) has(x int64) bool {
	_, ok := slices.BinarySearchFunc(rs, x, func(r seqRange, x int64) int {
		switch {
		case r.hi < x:
			return -1
		case r.lo > x:
			return 1
		}
		return 0
	})
	return ok
}

func (rs *seqRanges) add(lo, hi int64) {
	if lo > hi {
		return
	}
	out := (*rs)[:0:0]
	placed := false
	for _, r := range *rs {
		switch {
		case r.hi+1 < lo:
			out = append(out, r)
		case hi+1 < r.lo:
			if !placed {
				out = append(out, seqRange{lo, hi})
				placed = true
			}
			out = append(out, r)
		default: // overlaps or touches: merge
			lo, hi = min(lo, r.lo), max(hi, r.hi)
		}
	}
	if !placed {
		out = append(out, seqRange{lo, hi})
	}
	*rs = out
}

func (rs *seqRanges) remove(x int64) {
	for i, r := range *rs {
		if x < r.lo || x > r.hi {
			continue
		}
		var repl []seqRange
		if r.lo < x {
			repl = append(repl, seqRange{r.lo, x - 1})
		}
		if x < r.hi {
			repl = append(repl, seqRange{x + 1, r.hi})
		}
		*rs = slices.Replace(*rs, i, i+1, repl...)
		return
	}
}

// removeUpTo drops every conv_seq at or below x.
func (rs *seqRanges) removeUpTo(x int64) {
	i := 0
	for i < len(*rs) && (*rs)[i].hi <= x {
		i++
	}
	*rs = (*rs)[i:]
	if len(*rs) > 0 && (*rs)[0].lo <= x {
		(*rs)[0].lo = x + 1
	}
}

// idSet remembers the last max msg_ids handed over (FIFO eviction).
type idSet struct {
	m    map[int64]struct{}
	ring []int64
	max  int
	next int
}

func newIDSet(max int) *idSet {
	return &idSet{m: make(map[int64]struct{}), max: max}
}

func (s *idSet) has(id int64) bool {
	_, ok := s.m[id]
	return ok
}

func (s *idSet) add(id int64) {
	if s.max <= 0 {
		return
	}
	if len(s.ring) < s.max {
		s.ring = append(s.ring, id)
	} else {
		delete(s.m, s.ring[s.next])
		s.ring[s.next] = id
		s.next = (s.next + 1) % len(s.ring)
	}
	s.m[id] = struct{}{}
}
