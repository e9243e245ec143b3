package client

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// Message is a message handed to the application.
type Message struct {
	Seq       uint64 // inbox sequence (the cursor's unit)
	MsgID     int64
	ConvID    int64
	ConvSeq   int64
	SenderUID int64
	Kind      uint32
	Text      string
	CreatedAt time.Time
	Lane      string // "live" or "backfill": how it arrived
}

// maxGapHold bounds how long a live message waits for earlier ones of its
// conversation while the backfill is still running.
const maxGapHold = 10 * time.Second

// fillGapTimeout bounds the conversation pulls that fill one gap.
const fillGapTimeout = 8 * time.Second

// ErrStop, returned by a Handler, stops delivery: the message and everything
// after it stay unconfirmed (the server delivers them again next time).
var ErrStop = errors.New("client: stop delivery")

// Handler receives messages in conv_seq order within each conversation,
// each msg_id once. The client confirms a message to the server only after
// the handler returned nil for it: store it before returning. Any other
// error closes the session; the unconfirmed messages come again after the
// reconnect.
type Handler func(Message) error

// receiver is the read side of a Client: it deduplicates by msg_id, orders
// by conv_seq per conversation, calls the handler on one goroutine, and
// confirms batches once every message of them was handled.
type receiver struct {
	c            *Client
	stats        Stats // guarded by c.mu
	in           chan event
	seen         *idSet
	convs        map[int64]*convBuf
	batches      map[*batchTrack]struct{}
	idle         bool      // the server said the backfill is done
	lastBackfill time.Time // when the last backfill batch arrived
	stopped      bool
}

type event struct {
	s           *session
	batch       *pb.Batch
	down        bool          // s ended
	start       bool          // s started; welcome.pending tells whether backfill is due
	closing     chan struct{} // the client closes: confirm what was handled, then close this
	pulled      []Message     // a gap-filling pull's answer (conv pullConv)
	pullConv    int64
	pullPartial bool // the pull ended before it covered the gap
}

type batchTrack struct {
	s       *session
	id      uint64
	left    int
	handled []uint64 // seqs handled, for a partial confirmation at close
}

type pendingMsg struct {
	m       Message
	b       *batchTrack
	arrived time.Time
}

type convBuf struct {
	hwm     int64 // highest conv_seq handed over (0: none yet)
	pending []pendingMsg
	pull    int // gap fill by conversation pull: 0 none, 1 running, 2 done
}

func newReceiver(c *Client) *receiver {
	return &receiver{
		c:       c,
		in:      make(chan event, 64),
		seen:    newIDSet(c.opts.DedupeSize),
		convs:   map[int64]*convBuf{},
		batches: map[*batchTrack]struct{}{},
	}
}

func (r *receiver) run() {
	tick := time.NewTicker(r.c.opts.GapWait / 4)
	defer tick.Stop()
	for {
		select {
		case <-r.c.ctx.Done():
			return
		case ev := <-r.in:
			r.handle(ev)
		drain:
			for {
				select {
				case ev := <-r.in:
					r.handle(ev)
				default:
					break drain
				}
			}
		case <-tick.C:
		}
		r.release()
		r.confirm()
	}
}

func (r *receiver) handle(ev event) {
	switch {
	case ev.pullConv != 0:
		cb := r.convs[ev.pullConv]
		if cb == nil {
			return
		}
		if cb.pull == 1 {
			cb.pull = 2
			if ev.pullPartial {
				cb.pull = 0 // the pull gave up (server unreachable): ask again later
			}
		}
		now := time.Now()
		for _, m := range ev.pulled {
			i, _ := slices.BinarySearchFunc(cb.pending, m.ConvSeq, func(p pendingMsg, s int64) int { return int(p.m.ConvSeq - s) })
			cb.pending = slices.Insert(cb.pending, i, pendingMsg{m: m, arrived: now})
		}
	case ev.closing != nil:
		r.release()
		r.confirmPartial()
		r.stopped = true
		close(ev.closing)
	case ev.start:
		r.idle = ev.s.welcome.GetPending() == 0
	case ev.down:
		// Unconfirmed messages of that session come again on the next one.
		for b := range r.batches {
			if b.s == ev.s {
				delete(r.batches, b)
			}
		}
		for id, cb := range r.convs {
			cb.pending = slices.DeleteFunc(cb.pending, func(p pendingMsg) bool { return p.b.s == ev.s })
			if len(cb.pending) == 0 && cb.hwm == 0 {
				delete(r.convs, id)
			}
		}
	case ev.batch != nil:
		b := ev.batch
		if b.GetLane() == pb.Lane_BACKFILL {
			r.idle = !b.GetHasMore()
			r.lastBackfill = time.Now()
		}
		if len(b.GetMessages()) == 0 {
			return
		}
		bt := &batchTrack{s: ev.s, id: b.GetBatchId(), left: len(b.GetMessages())}
		r.batches[bt] = struct{}{}
		lane := "backfill"
		if b.GetLane() == pb.Lane_LIVE {
			lane = "live"
		}
		now := time.Now()
		r.c.mu.Lock()
		if b.GetLane() == pb.Lane_LIVE {
			r.stats.LiveReceived += len(b.GetMessages())
		} else {
			r.stats.BackfillReceived += len(b.GetMessages())
		}
		r.c.mu.Unlock()
		for _, pm := range b.GetMessages() {
			if ev := pm.GetEvent(); ev != nil {
				// Events are applied at once (they carry positions, which
				// only ever grow) and confirmed with their batch.
				r.c.applyEvent(Event{Type: ev.GetType(), ConvID: ev.GetConvId(), UpTo: ev.GetUpToConvSeq(), PeerUID: ev.GetPeerUid(), Seq: pm.GetSeq()})
				bt.left--
				bt.handled = append(bt.handled, pm.GetSeq())
				continue
			}
			m := fromProto(pm, lane)
			cb := r.convs[m.ConvID]
			if cb == nil {
				cb = &convBuf{}
				if r.c.opts.LastConvSeq != nil {
					cb.hwm = r.c.opts.LastConvSeq(m.ConvID)
				}
				r.convs[m.ConvID] = cb
			}
			i, _ := slices.BinarySearchFunc(cb.pending, m.ConvSeq, func(p pendingMsg, s int64) int {
				return int(p.m.ConvSeq - s)
			})
			cb.pending = slices.Insert(cb.pending, i, pendingMsg{m: m, b: bt, arrived: now})
		}
	}
}

// release hands over every message that is next in its conversation, and
// those whose gap has waited long enough.
//
// A gap (conv_seq above hwm+1) on the backfill lane is final: backfill
// walks the inbox in order, which within a conversation is conv_seq order,
// so the missing numbers are not in this inbox (the user joined later, the
// device's window starts later). A gap on the live lane may be filled by
// the backfill still draining: it waits until the backfill is done and
// GapWait passed.
func (r *receiver) release() {
	if r.stopped {
		return
	}
	now := time.Now()
	for _, cb := range r.convs {
		for len(cb.pending) > 0 {
			p := cb.pending[0]
			if r.seen.has(p.m.MsgID) || (r.c.opts.Delivered != nil && r.c.opts.Delivered(p.m.MsgID)) {
				r.c.mu.Lock()
				r.stats.Duplicates++
				r.c.mu.Unlock()
				r.done(p) // the application has it: confirm it again
				cb.pending = cb.pending[1:]
				continue
			}
			if p.m.ConvSeq > cb.hwm+1 && !r.releaseGap(cb, p, now) {
				break // hold it: earlier messages of the conversation may come
			}
			cb.pull = 0
			if err := r.c.opts.Handler(p.m); err != nil {
				if p.b == nil { // a pulled message: nothing to reconnect for
					r.stopped = errors.Is(err, ErrStop)
					return
				}
				r.handlerFailed(p, err)
				return
			}
			r.seen.add(p.m.MsgID)
			r.c.applyMessage(p.m, r.c.Welcome().GetUid())
			r.c.mu.Lock()
			r.stats.Handled++
			r.c.mu.Unlock()
			cb.hwm = max(cb.hwm, p.m.ConvSeq)
			r.done(p)
			cb.pending = cb.pending[1:]
		}
	}
}

// releaseGap decides whether a message after a gap in its conversation is
// handed over now.
//
//   - A live message waits while the backfill runs (it may fill the gap) and
//     GapWait after it is done.
//   - Then, in a conversation this client already follows (hwm > 0), the gap
//     may be a real hole (entries the inbox holds out of order after a
//     fault): it is filled from the conversation timeline first; what the
//     pull does not find (the user was not a member then) is not this
//     device's to have.
//   - Otherwise (the client's first message of that conversation) it goes: the
//     backfill walks the inbox in order, so earlier ones are not in it.
//   - A live message waits for the backfill at most maxGapHold once the
//     backfill has stopped moving (a device that waits for the server while
//     the server waits for its confirmation would wait for good); then the
//     two rules above apply.
func (r *receiver) releaseGap(cb *convBuf, p pendingMsg, now time.Time) bool {
	waited := now.Sub(p.arrived)
	stalled := waited >= maxGapHold && now.Sub(r.lastBackfill) >= maxGapHold
	if !stalled && p.m.Lane == "live" && !(r.idle && waited >= r.c.opts.GapWait) {
		return false // the backfill, still running, may fill the gap
	}
	if cb.hwm == 0 {
		return true // the first message of the conversation here
	}
	if cb.pull == 0 {
		cb.pull = 1
		go r.fillGap(p.m.ConvID, cb.hwm, p.m.ConvSeq)
	}
	return cb.pull == 2
}

func (r *receiver) done(p pendingMsg) {
	if p.b == nil {
		return // pulled: not an inbox entry, nothing to confirm
	}
	p.b.left--
	p.b.handled = append(p.b.handled, p.m.Seq)
}

// fillGap pulls the messages between hwm and before of a conversation.
//
// A pull that fails (rate limited, connection lost) is retried until
// fillGapTimeout; after that the gap is given up on (the receiver hands the
// later message over rather than hold the conversation for good).
func (r *receiver) fillGap(conv, hwm, before int64) {
	ctx, cancel := context.WithTimeout(r.c.ctx, fillGapTimeout)
	defer cancel()
	var got []Message
	after := hwm
	complete := false
	for after+1 < before {
		msgs, more, err := r.c.Pull(ctx, conv, after, 0, int(min(before-after-1, 50)))
		if err != nil {
			r.c.report(err)
			wait := 200 * time.Millisecond
			var we *wire.Error
			if errors.As(err, &we) && we.RetryAfterMs > 0 {
				wait = time.Duration(we.RetryAfterMs) * time.Millisecond
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
				continue
			}
			break
		}
		for _, m := range msgs {
			if m.ConvSeq < before {
				got = append(got, m)
				after = m.ConvSeq
			}
		}
		if !more || len(msgs) == 0 || after >= before-1 {
			complete = true
			break
		}
	}
	if after+1 >= before {
		complete = true
	}
	select {
	case r.in <- event{pullConv: conv, pulled: got, pullPartial: !complete}:
	case <-r.c.ctx.Done():
	}
}

func (r *receiver) handlerFailed(p pendingMsg, err error) {
	if errors.Is(err, ErrStop) {
		r.stopped = true
		return
	}
	r.c.report(err)
	p.b.s.conn.close() // reconnect; unconfirmed messages come again
}

// confirm acknowledges every batch whose messages were all handled.
func (r *receiver) confirm() {
	if r.c.opts.NoAck {
		return
	}
	acks := map[*session][]uint64{}
	for b := range r.batches {
		if b.left == 0 {
			if b.id != 0 {
				acks[b.s] = append(acks[b.s], b.id)
			}
			delete(r.batches, b)
		}
	}
	for s, ids := range acks {
		if err := s.write(&pb.Ack{BatchIds: ids}); err != nil {
			s.conn.close()
		}
	}
}

// confirmPartial acknowledges the handled messages of unfinished batches
// (called once delivery stopped, before closing).
func (r *receiver) confirmPartial() {
	if r.c.opts.NoAck {
		return
	}
	r.confirm()
	acks := map[*session][]uint64{}
	for b := range r.batches {
		if len(b.handled) > 0 {
			acks[b.s] = append(acks[b.s], b.handled...)
		}
	}
	for s, seqs := range acks {
		_ = s.write(&pb.Ack{Seqs: seqs})
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

// Stats counts what reached the client.
type Stats struct {
	LiveReceived     int // messages that arrived on the live lane
	BackfillReceived int // messages that arrived on the backfill lane
	Duplicates       int // messages dropped because their msg_id was handed over before
	Handled          int // messages the handler took
}

// Stats returns the client's counters (zero without a Handler).
func (c *Client) Stats() Stats {
	if c.recv == nil {
		return Stats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.recv.stats
}
