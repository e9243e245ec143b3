package client

import (
	"context"
	"errors"
	"time"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// Message is a message handed to the application.
type Message struct {
	Seq       uint64 // inbox sequence (the cursor's unit); 0 for a pulled message
	MsgID     int64
	ConvID    int64
	ConvSeq   int64
	SenderUID int64
	Kind      uint32
	Text      string
	CreatedAt time.Time
	// Lane is how the message arrived:
	//   - "live": stored while the device was connected;
	//   - "backfill": the device's inbox from its cursor;
	//   - "pull": fetched from the conversation's timeline to fill a gap;
	//   - "newest": the newest page of a device that was offline too long
	//     (welcome offline_too_long), handed over at once, ahead of the
	//     conversation's conv_seq order by design; the older messages follow
	//     as the backfill reaches them, in order.
	Lane string
	// Late is set on a message that came after the client gave up waiting
	// for it: its conv_seq is below one the in-order stream of its
	// conversation already passed (a gap released after GapWait or
	// maxGapHold, a pull that did not find it). It is a real message that
	// was not handed over before; place it by conv_seq.
	Late bool
}

// maxGapHold bounds how long a live message waits for earlier ones of its
// conversation while the backfill is still running.
const maxGapHold = 10 * time.Second

// fillGapTimeout bounds the conversation pulls that fill one gap.
const fillGapTimeout = 8 * time.Second

// ErrStop, returned by a Handler, stops delivery: the message and everything
// after it stay unconfirmed (the server delivers them again next time).
var ErrStop = errors.New("client: stop delivery")

// Handler receives the device's messages, each msg_id once, and within each
// conversation in conv_seq order, with two exceptions the message says:
//
//   - Lane "newest": the newest page of a device that was offline too long
//     comes first, ahead of the older messages of its conversations; those
//     follow in conv_seq order (and the newest ones are not handed over
//     again when the backfill reaches them).
//   - Late: a message the client had given up waiting for (see
//     Message.Late). The client never drops such a message to keep the
//     order: no loss comes before order, and the flag keeps the order
//     visible. An application that shows a conversation by conv_seq (as it
//     must for the newest page anyway) places both where they belong.
//
// The client confirms a message to the server only after the handler
// returned nil for it: store it before returning. Any other error closes
// the session; the unconfirmed messages come again after the reconnect (a
// refused pulled message, which is no inbox entry, is offered again).
type Handler func(Message) error

// receiver is the read side of a Client: it feeds the ordering buffer
// (order), calls the handler on one goroutine with what the buffer
// releases, and confirms batches once every message of them was handled.
type receiver struct {
	c       *Client
	stats   Stats // guarded by c.mu
	in      chan event
	ord     *order
	batches map[*batchTrack]struct{}
	stopped bool
}

type event struct {
	s           *session
	batch       *pb.Batch
	down        bool          // s ended
	start       bool          // s started; welcome.pending tells whether backfill is due
	closing     chan struct{} // the client closes: confirm what was handled, then close this
	pulled      []Message     // a gap-filling pull's answer (conv pullConv)
	pullConv    int64
	pullPartial bool  // the pull ended before it covered the gap
	pullExpired int64 // the conversation's retention horizon the pull reported
}

// batchTrack follows one batch until every message of it was handled. The
// handled seqs are the one record of progress: the batch is complete when
// all size of them are in, and a partial confirmation at close sends them.
type batchTrack struct {
	s       *session
	id      uint64
	size    int      // messages in the batch
	handled []uint64 // seqs handled
}

func (b *batchTrack) handle(seq uint64) { b.handled = append(b.handled, seq) }
func (b *batchTrack) complete() bool    { return len(b.handled) == b.size }

func newReceiver(c *Client) *receiver {
	return &receiver{
		c:       c,
		in:      make(chan event, 64),
		ord:     newOrder(c.opts),
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
		r.ord.addPulled(ev.pullConv, ev.pulled, ev.pullPartial, ev.pullExpired, time.Now())
	case ev.closing != nil:
		r.release()
		r.confirmPartial()
		r.stopped = true
		close(ev.closing)
	case ev.start:
		r.ord.idle = ev.s.welcome.GetPending() == 0
	case ev.down:
		// Unconfirmed messages of that session come again on the next one.
		for b := range r.batches {
			if b.s == ev.s {
				delete(r.batches, b)
			}
		}
		r.ord.dropSession(ev.s)
	case ev.batch != nil:
		r.onBatch(ev.s, ev.batch)
	}
}

func (r *receiver) onBatch(s *session, b *pb.Batch) {
	now := time.Now()
	if b.GetLane() == pb.Lane_BACKFILL {
		r.ord.idle = !b.GetHasMore()
		r.ord.lastBackfill = now
	}
	// Ranges retention removed go first: the order buffer passes over
	// them, so this batch's messages after them are next in order.
	for _, x := range b.GetExpired() {
		r.ord.expire(x.GetConvId(), x.GetUpToConvSeq())
		r.c.applyExpired(x.GetConvId(), x.GetUpToConvSeq())
	}
	if len(b.GetMessages()) == 0 {
		return
	}
	bt := &batchTrack{s: s, id: b.GetBatchId(), size: len(b.GetMessages())}
	r.batches[bt] = struct{}{}
	lane := "backfill"
	switch {
	case b.GetNewest():
		lane = "newest"
	case b.GetLane() == pb.Lane_LIVE:
		lane = "live"
	}
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
			bt.handle(pm.GetSeq())
			continue
		}
		p := pendingMsg{m: fromProto(pm, lane), b: bt, arrived: now, expired: pm.GetExpired()}
		if b.GetNewest() {
			r.ord.addNewest(p)
		} else {
			r.ord.add(p)
		}
	}
}

// release hands the application what the ordering buffer lets go.
func (r *receiver) release() {
	if r.stopped {
		return
	}
	r.ord.release(time.Now(), r.act)
}

// act carries out one decision of the ordering buffer; false: the handler
// did not take the message.
func (r *receiver) act(st step) bool {
	switch st.kind {
	case stepPull:
		go r.fillGap(st.conv, st.after, st.before)
		return true
	case stepDuplicate, stepNewestAgain, stepExpired:
		r.c.mu.Lock()
		switch st.kind {
		case stepDuplicate:
			r.stats.Duplicates++
		case stepNewestAgain:
			r.stats.NewestAgain++
		case stepExpired:
			r.stats.Expired++
		}
		r.c.mu.Unlock()
		if st.kind == stepExpired {
			r.c.applyExpiredEntry(st.p.m)
		}
		r.done(st.p) // the application has it, or it has no body: confirm it
		return true
	}
	p := st.p
	if err := r.c.opts.Handler(p.m); err != nil {
		if p.b == nil { // a pulled message: nothing to reconnect for
			r.stopped = errors.Is(err, ErrStop)
			return false
		}
		r.handlerFailed(p, err)
		return false
	}
	r.c.applyMessage(p.m, r.c.Welcome().GetUid())
	r.c.mu.Lock()
	r.stats.Handled++
	if p.m.Late {
		r.stats.Late++
	}
	r.c.mu.Unlock()
	r.done(p)
	return true
}

func (r *receiver) done(p pendingMsg) {
	if p.b == nil {
		return // pulled: not an inbox entry, nothing to confirm
	}
	p.b.handle(p.m.Seq)
}

// fillGap pulls the messages between hwm and before of a conversation.
//
// A pull that fails (rate limited, connection lost) is retried until
// fillGapTimeout; after that the gap is given up on (the receiver hands the
// later message over rather than hold the conversation for good). The
// fill stops at the retention horizon a pull reports: below it nothing
// will ever come.
func (r *receiver) fillGap(conv, hwm, before int64) {
	ctx, cancel := context.WithTimeout(r.c.ctx, fillGapTimeout)
	defer cancel()
	var got []Message
	var expired int64
	after := hwm
	complete := false
	for after+1 < before {
		r.c.mu.Lock()
		r.stats.GapPulls++
		r.c.mu.Unlock()
		pg, err := r.c.PullPage(ctx, conv, after, 0, int(min(before-after-1, 50)))
		msgs, more := pg.Messages, pg.HasMore
		if err == nil && pg.ExpiredUpTo > after {
			expired, after = pg.ExpiredUpTo, min(pg.ExpiredUpTo, before-1)
		}
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
	case r.in <- event{pullConv: conv, pulled: got, pullPartial: !complete, pullExpired: expired}:
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
		if b.complete() {
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

// Stats counts what reached the client.
type Stats struct {
	LiveReceived     int // messages that arrived on the live lane
	BackfillReceived int // messages that arrived on the backfill lane
	Duplicates       int // messages not handed over again: they were before (repeats on the wire)
	Handled          int // messages the handler took
	Late             int // of them, flagged Late (see Message.Late)
	NewestAgain      int // messages the backfill brought after a newest page had handed them over (by design, not repeats)
	Expired          int // inbox entries whose body the server's retention removed: confirmed, never handed over
	GapPulls         int // conversation pulls made to fill gaps
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
