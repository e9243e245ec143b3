// Package ledger is a device session's confirmation ledger: what the
// gateway handed over to the device (backfill pages, live batches, the
// newest page of an offline-too-long device), what the device confirmed,
// and the one rule by which the device cursor moves.
//
// In inbox sequence numbers of the user's partition:
//
//	cursor   every entry of the device's inbox <= cursor is confirmed (the
//	         durable consumer's ack floor, mirrored to Postgres)
//	covered  every entry <= covered was handed over to the device (or is
//	         not the device's): the backfill has passed it
//	unconfirmed  entries handed over and not confirmed yet, on any lane
//	ahead    entries above covered already handed over on the live lane or
//	         in the newest page; the backfill skips them when it gets there
//
// and the rule, kept after every change:
//
//	cursor = max(cursor, min(covered, min(unconfirmed) - 1))
//
// so the cursor never passes an entry the device did not confirm, never
// passes one not handed over yet, and never moves backwards. Repeat, never
// skip.
//
// A Ledger does no I/O, reads no clock (callers pass the time) and has no
// lock: the session's mutex guards it. What a moved cursor implies
// (acknowledging the consumer, mirroring the cursor) is the caller's, told
// by the Moved results.
package ledger

import (
	"slices"
	"time"
)

// Info is what a DELIVERED receipt needs of a confirmed message entry.
type Info struct {
	Conv, ConvSeq, Sender int64
}

// Entry is one inbox entry handed over to the device.
type Entry struct {
	Seq uint64
	// Message is set for message entries: confirming one reports its Info
	// (for the DELIVERED receipt). Events are confirmed silently.
	Message bool
	Info    Info
}

// Ledger is the confirmation state of one device session. Create it with New.
type Ledger struct {
	cursor, covered uint64

	unconf map[uint64]unconfirmed
	low    seqHeap // seqs of unconf and some already confirmed (lazy deletion): min(unconfirmed)

	ahead    map[uint64]struct{}
	aheadLow seqHeap // exactly the keys of ahead: they leave it lowest first

	batches map[uint64]batch
	order   []uint64 // batch ids in hand-over order, lazily pruned: the oldest outstanding one
	next    uint64   // the last batch id given out
	pages   int      // backfill batches awaiting confirmation
	sent    int      // backfill batches handed over

	// TakeBack forgets what it takes back; acks of it that come late are
	// no-ops, not errors: batches up to staleBatch, entries up to staleSeq.
	staleBatch, staleSeq uint64

	free [][]uint64 // seq slices of finished batches, for reuse
}

type unconfirmed struct {
	message bool
	info    Info
}

type batch struct {
	seqs     []uint64
	backfill bool
	at       time.Time // handed over
}

// New returns the ledger of a session whose device has confirmed
// everything up to cursor.
func New(cursor uint64) *Ledger {
	return &Ledger{cursor: cursor, covered: cursor}
}

// release drops the maps and slices once nothing awaits confirmation:
// a device that is idle keeps a bare ledger, not the maps its last burst
// grew (their groups never shrink) nor up to eight recycled seq slices of
// up to 4,096 entries each. They are made again at the next hand-over
// (a few allocations per live message, against milliseconds of work).
func (l *Ledger) release() {
	if len(l.unconf) > 0 || len(l.batches) > 0 || len(l.ahead) > 0 {
		return
	}
	l.unconf, l.ahead, l.batches = nil, nil, nil
	l.low, l.aheadLow, l.order, l.free = nil, nil, nil, nil
}

// Cursor is the highest position with everything up to it confirmed.
func (l *Ledger) Cursor() uint64 { return l.cursor }

// Covered is the position the backfill has handed over up to.
func (l *Ledger) Covered() uint64 { return l.covered }

// Unconfirmed is the number of entries handed over and not confirmed.
func (l *Ledger) Unconfirmed() int { return len(l.unconf) }

// Ahead is the number of entries above Covered already handed over.
func (l *Ledger) Ahead() int { return len(l.ahead) }

// SentAhead reports whether seq, above Covered, was handed over already on
// the live lane or in the newest page: the backfill leaves it out.
func (l *Ledger) SentAhead(seq uint64) bool {
	_, ok := l.ahead[seq]
	return ok
}

// Pages is the number of backfill pages awaiting confirmation (the
// device's window is counted in these).
func (l *Ledger) Pages() int { return l.pages }

// PagesSent is the number of backfill pages handed over.
func (l *Ledger) PagesSent() int { return l.sent }

// Oldest returns when the oldest batch still awaiting confirmation was
// handed over.
func (l *Ledger) Oldest() (time.Time, bool) {
	i := 0
	for i < len(l.order) {
		if b, ok := l.batches[l.order[i]]; ok {
			l.order = l.order[i:]
			return b.at, true
		}
		i++
	}
	l.order = l.order[:0]
	return time.Time{}, false
}

// Page records a backfill page: it covers (from, upTo], and entries are
// the device's entries of that range that are not SentAhead, in seq
// order. from must be Covered: a page read before covered moved (an
// ack_range meanwhile) is refused (ok false) and must be read again.
//
// A page with entries gets a batch id (the device confirms it with it);
// an empty one only moves coverage. Moved reports whether the cursor
// moved.
func (l *Ledger) Page(from, upTo uint64, entries []Entry, at time.Time) (id uint64, moved, ok bool) {
	if from != l.covered {
		return 0, false, false
	}
	l.cover(max(upTo, from))
	if len(entries) > 0 {
		seqs := l.seqBuf(len(entries))
		for _, e := range entries {
			l.add(e)
			seqs = append(seqs, e.Seq)
		}
		id = l.newBatch(seqs, true, at)
		l.pages++
		l.sent++
	}
	moved = l.advance()
	l.release() // a covering read (an empty page) may settle it
	return id, moved, true
}

// Live records an entry about to go out on the live lane. It reports
// false when the entry needs not go: the backfill covered it already, or
// it went out before.
func (l *Ledger) Live(e Entry) bool {
	if e.Seq <= l.covered || l.SentAhead(e.Seq) {
		return false
	}
	l.markAhead(e.Seq)
	l.add(e)
	return true
}

// LiveBatch gives live entries (recorded with Live) the batch id they are
// written with.
func (l *Ledger) LiveBatch(seqs []uint64, at time.Time) uint64 {
	return l.newBatch(append(l.seqBuf(len(seqs)), seqs...), false, at)
}

// Newest records the newest page of an offline-too-long device, handed
// over ahead of the backfill: its entries count as ahead (the backfill
// skips them), and the cursor still moves only over what is confirmed.
func (l *Ledger) Newest(entries []Entry, at time.Time) uint64 {
	seqs := l.seqBuf(len(entries))
	for _, e := range entries {
		if e.Seq > l.covered {
			l.markAhead(e.Seq)
		}
		l.add(e)
		seqs = append(seqs, e.Seq)
	}
	return l.newBatch(seqs, false, at)
}

// AckResult is what a confirmation changed.
type AckResult struct {
	// Receipts holds the Info of every message entry it confirmed.
	Receipts []Info
	// Moved reports whether the cursor moved.
	Moved bool
	// Batches is the number of batches it confirmed.
	Batches int
	// UnknownBatches and UnknownSeqs name what was not awaiting
	// confirmation (never handed over, or confirmed already); the rest of
	// the ack took effect.
	UnknownBatches, UnknownSeqs []uint64
}

// Ack confirms whole batches and single entries. Receipts are appended to
// receipts.
func (l *Ledger) Ack(receipts []Info, batchIDs, seqs []uint64) AckResult {
	r := AckResult{Receipts: receipts}
	for _, seq := range seqs {
		if _, ok := l.unconf[seq]; !ok {
			if seq > l.staleSeq {
				r.UnknownSeqs = append(r.UnknownSeqs, seq)
			}
			continue
		}
		r.Receipts = l.confirm(r.Receipts, seq)
	}
	for _, id := range batchIDs {
		b, ok := l.batches[id]
		if !ok {
			if id > l.staleBatch {
				r.UnknownBatches = append(r.UnknownBatches, id)
			}
			continue
		}
		delete(l.batches, id)
		r.Receipts = slices.Grow(r.Receipts, len(b.seqs)) // one allocation per batch, not one per doubling
		for _, seq := range b.seqs {
			r.Receipts = l.confirm(r.Receipts, seq)
		}
		if b.backfill {
			l.pages--
		}
		l.recycle(b.seqs)
		r.Batches++
	}
	r.Moved = l.advance()
	l.release()
	return r
}

// AckRange confirms every entry up to upTo, handed over or not (a client
// that chose not to fetch an old backlog). Jumped reports that coverage
// moved up to upTo: the backfill resumes after it. Receipts are appended
// to receipts.
func (l *Ledger) AckRange(receipts []Info, upTo uint64) (r AckResult, jumped bool) {
	r.Receipts = receipts
	if upTo <= l.cursor {
		return r, false
	}
	for len(l.low) > 0 && l.low.top() <= upTo {
		seq := l.low.pop()
		if _, ok := l.unconf[seq]; ok {
			r.Receipts = l.confirm(r.Receipts, seq)
		}
	}
	l.dropAheadUpTo(upTo)
	for id, b := range l.batches {
		b.seqs = slices.DeleteFunc(b.seqs, func(seq uint64) bool { return seq <= upTo })
		if len(b.seqs) > 0 {
			l.batches[id] = b
			continue
		}
		delete(l.batches, id)
		if b.backfill {
			l.pages--
		}
		l.recycle(b.seqs)
		r.Batches++
	}
	if upTo > l.covered {
		l.covered = upTo
		jumped = true
	}
	r.Moved = l.advance()
	l.release()
	return r, jumped
}

// TakeBack forgets every entry handed over and not confirmed, as if it had
// never gone out: coverage falls back to the cursor, so the backfill hands
// them over again from there (a device that stopped confirming on a live
// connection). Acks that come late for what it took back are no-ops. It
// returns the number of entries taken back.
func (l *Ledger) TakeBack() int {
	n := len(l.unconf)
	stale := l.covered
	for seq := range l.unconf {
		stale = max(stale, seq)
	}
	for seq := range l.ahead {
		stale = max(stale, seq)
	}
	l.staleSeq, l.staleBatch = max(l.staleSeq, stale), l.next
	clear(l.unconf)
	clear(l.ahead)
	l.low, l.aheadLow = l.low[:0], l.aheadLow[:0]
	for id, b := range l.batches {
		l.recycle(b.seqs)
		delete(l.batches, id)
	}
	l.order = l.order[:0]
	l.pages = 0
	l.covered = l.cursor
	l.release()
	return n
}

// cover moves coverage up to upTo: entries ahead up to there are now
// behind it.
func (l *Ledger) cover(upTo uint64) {
	l.covered = upTo
	l.dropAheadUpTo(upTo)
}

func (l *Ledger) dropAheadUpTo(upTo uint64) {
	for len(l.aheadLow) > 0 && l.aheadLow.top() <= upTo {
		delete(l.ahead, l.aheadLow.pop())
	}
}

func (l *Ledger) markAhead(seq uint64) {
	if _, ok := l.ahead[seq]; !ok {
		if l.ahead == nil {
			l.ahead = make(map[uint64]struct{})
		}
		l.ahead[seq] = struct{}{}
		l.aheadLow.push(seq)
	}
}

func (l *Ledger) add(e Entry) {
	if _, ok := l.unconf[e.Seq]; !ok {
		l.low.push(e.Seq)
	}
	if l.unconf == nil {
		l.unconf = make(map[uint64]unconfirmed)
	}
	l.unconf[e.Seq] = unconfirmed{message: e.Message, info: e.Info}
}

func (l *Ledger) confirm(receipts []Info, seq uint64) []Info {
	u, ok := l.unconf[seq]
	if !ok {
		return receipts
	}
	delete(l.unconf, seq)
	if u.message {
		receipts = append(receipts, u.info)
	}
	return receipts
}

// minUnconfirmed returns the lowest unconfirmed seq. Confirmed seqs are
// dropped from the heap when they reach its top; a heap grown far beyond
// the set (an old entry held while many later ones were confirmed) is
// rebuilt, so the work stays proportional to what is confirmed.
func (l *Ledger) minUnconfirmed() (uint64, bool) {
	if len(l.low) > 2*len(l.unconf)+64 {
		l.low = l.low[:0]
		for seq := range l.unconf {
			l.low = append(l.low, seq)
		}
		l.low.init()
	}
	for len(l.low) > 0 {
		if _, ok := l.unconf[l.low.top()]; ok {
			return l.low.top(), true
		}
		l.low.pop()
	}
	return 0, false
}

// advance applies the cursor rule. It reports whether the cursor moved.
func (l *Ledger) advance() bool {
	c := l.covered
	if low, ok := l.minUnconfirmed(); ok && low-1 < c {
		c = low - 1
	}
	if c <= l.cursor {
		return false
	}
	l.cursor = c
	return true
}

func (l *Ledger) newBatch(seqs []uint64, backfill bool, at time.Time) uint64 {
	l.next++
	if l.batches == nil {
		l.batches = make(map[uint64]batch)
	}
	l.batches[l.next] = batch{seqs: seqs, backfill: backfill, at: at}
	if len(l.order) == cap(l.order) && len(l.order) > 2*len(l.batches)+16 {
		l.order = slices.DeleteFunc(l.order, func(id uint64) bool { _, ok := l.batches[id]; return !ok })
	}
	l.order = append(l.order, l.next)
	return l.next
}

// seqBuf returns an empty slice for a batch's seqs, reused when possible.
func (l *Ledger) seqBuf(n int) []uint64 {
	for i := len(l.free) - 1; i >= 0; i-- {
		if cap(l.free[i]) >= n {
			b := l.free[i]
			l.free = slices.Delete(l.free, i, i+1)
			return b[:0]
		}
	}
	return make([]uint64, 0, n)
}

// recycle keeps a finished batch's seq slice for the next batch.
func (l *Ledger) recycle(seqs []uint64) {
	const keep = 8
	if cap(seqs) == 0 || cap(seqs) > 1<<12 {
		return
	}
	if len(l.free) < keep {
		l.free = append(l.free, seqs[:0])
	}
}

// seqHeap is a binary min-heap of seqs.
type seqHeap []uint64

func (h seqHeap) top() uint64 { return h[0] }

func (h *seqHeap) push(seq uint64) {
	*h = append(*h, seq)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p] <= s[i] {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h *seqHeap) pop() uint64 {
	s := *h
	top := s[0]
	n := len(s) - 1
	s[0] = s[n]
	*h = s[:n]
	h.down(0)
	return top
}

func (h seqHeap) down(i int) {
	n := len(h)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if c+1 < n && h[c+1] < h[c] {
			c++
		}
		if h[i] <= h[c] {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}

func (h seqHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}
