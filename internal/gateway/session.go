package gateway

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nuid"
	"golang.org/x/time/rate"

	"github.com/inboxd/inboxd/internal/gateway/ledger"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// A session is the read side of one device's connection: it moves the
// device's inbox from its cursor to the device, in backfill pages and on the
// live lane, and moves the cursor when the device confirms. Its parts:
//
//	ledger        what was handed over and confirmed, and so where the
//	              cursor stands (package ledger: cursor = min(covered,
//	              min(unconfirmed)-1))
//	consumer.go   the device's durable consumer: open, reposition,
//	              recreate from the mirror, tail reads
//	pump.go       the backfill loop and its budget
//	pages.go      the page sources (archive, tail) and the hand-over
//
// Backfill reads older ranges from the Postgres archive index (cost follows
// the device's own backlog) and the recent tail from the durable consumer
// (which then scans only that tail). The consumer is only ever positioned
// by ResetConsumerToSequence at cursor+1, a confirmed position (entries up
// to covered that it then delivers again are skipped), so its ack floor
// never runs ahead of what the device stored.
type session struct {
	g        *Gateway
	c        *Conn
	id       string
	uid      int64
	device   string
	p        int
	consumer string
	prof     profile
	epoch    atomic.Uint64 // the INBOX stream's epoch the session opened on (epoch.go)
	budget   backfillBudget
	cons     *deviceConsumer

	ctx     *closeCtx     // closed when the session ends (closectx.go)
	wake    chan struct{} // pokes the pump
	pumping atomic.Bool   // a pump goroutine runs
	done    chan struct{} // closed when the session ended and its cursor is saved

	mu        sync.Mutex
	led       *ledger.Ledger
	tail      tailState
	needFinal bool        // a has_more=true batch went out: end the backfill with has_more=false
	archiving bool        // the backfill reads from the archive (fromArchive)
	ackTimer  *time.Timer // runs checkAcks while batches await confirmation
	ackArmed  bool        // ackTimer is set
	started   bool        // the welcome is queued: live entries may go out
	early     []earlyLive // live entries that arrived before that
	closed    bool
}

// earlyLive is a live entry that arrived before the welcome went out: it
// is recorded in the ledger (which the login's open replaces) at start.
type earlyLive struct {
	raw []byte
	e   ledger.Entry
}

// maxUnconfirmed bounds the messages a session keeps sending live without
// confirmation.
const maxUnconfirmed = 10000

// startSession opens the device's cursor and registers the session; it
// returns the welcome fields. mirror is the device's mirrored cursor as the
// login read it (nil: read it here).
func (g *Gateway) startSession(ctx context.Context, c *Conn, mirror *mirrorRead) (*session, uint64, error) {
	prof := profiles[c.kind]
	uid := c.id.UID
	p := ids.Partition(uid, g.opts.Layout.InboxPartitions)
	s := &session{
		g: g, c: c, id: nuid.Next(), uid: uid, device: c.id.Device, p: p,
		prof: prof,
		budget: backfillBudget{
			device: rate.NewLimiter(prof.rate, prof.burst), deviceBurst: prof.burst,
			user: func() *rate.Limiter { return g.router.limiter(uid) }, userBurst: g.opts.UserBackfillBurst,
		},
		cons: newDeviceConsumer(g, p, uid, c.id.Device),
		wake: make(chan struct{}, 1),
		done: make(chan struct{}),
		led:  ledger.New(0), // until open knows the cursor
		ctx:  newCloseCtx(),
	}
	s.consumer = s.cons.name
	c.setSession(s) // before live entries can arrive: the writer registers their batches with it

	// Register first: the live lane must be listening before the cursor is
	// read, or an entry published in between would be neither live nor
	// (if the tail was read just before it) backfilled... it would be
	// backfilled later; registering first keeps the common path exact.
	replaced, ending, err := g.router.register(s)
	if err != nil {
		c.setSession(nil)
		return nil, 0, err
	}
	for _, o := range replaced {
		o.c.replaced()
	}
	if ending != nil {
		replaced = append(replaced, ending)
	}
	// Their final cursors are saved before we read ours: a login right
	// after a disconnect would otherwise resend what the device confirmed
	// last (duplicates the client drops, but still wire and work).
	wait := time.After(2 * time.Second)
	for _, o := range replaced {
		select {
		case <-o.done:
		case <-wait:
		}
	}
	if len(replaced) > 0 {
		mirror = nil // read after their final cursors were saved
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	o, err := s.cons.open(cctx, mirror)
	if err != nil {
		g.router.unregister(s)
		c.setSession(nil)
		// A newer login of the device may have replaced this one while
		// it opened: its connection's close closed the session (and
		// closes done) already.
		s.mu.Lock()
		closed := s.closed
		s.closed = true
		s.mu.Unlock()
		s.ctx.close()
		if !closed {
			close(s.done)
		}
		return nil, 0, err
	}
	s.mu.Lock()
	s.led = ledger.New(o.cursor)
	s.tail.opened(o)
	s.epoch.Store(o.epoch)
	s.mu.Unlock()
	g.mirror.mark(store.DeviceCursor{UID: s.uid, Device: s.device, Consumer: s.consumer, AckSeq: o.cursor, Epoch: o.epoch})
	return s, o.pending, nil
}

// SessionState is a session's delivery state, for operators (/debug/sessions).
type SessionState struct {
	UID         int64  `json:"uid"`
	Device      string `json:"device"`
	Consumer    string `json:"consumer"`
	Cursor      uint64 `json:"cursor"`
	Covered     uint64 `json:"covered"`
	Unconfirmed int    `json:"unconfirmed"`
	SentLive    int    `json:"sent_live"`
	Pages       int    `json:"pages"`
	ConsumerAt  uint64 `json:"consumer_at"`
	TailLeft    uint64 `json:"tail_left"`
	TailKnown   bool   `json:"tail_known"`
	Started     bool   `json:"started"`
	Pumping     bool   `json:"pumping"` // a backfill goroutine runs (pump.go)
}

// State returns a snapshot of the session's delivery state: the one way
// for the rest of the gateway to read it.
func (s *session) State() SessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SessionState{UID: s.uid, Device: s.device, Consumer: s.consumer, Cursor: s.led.Cursor(), Covered: s.led.Covered(),
		Unconfirmed: s.led.Unconfirmed(), SentLive: s.led.Ahead(), Pages: s.led.Pages(), ConsumerAt: s.tail.at,
		TailLeft: s.tail.left, TailKnown: s.tail.known, Started: s.started, Pumping: s.pumping.Load()}
}

// start lets live entries and the backfill flow, after the welcome.
func (s *session) start() {
	s.mu.Lock()
	s.started = true
	var out []outItem
	for _, it := range s.early {
		if s.acceptLiveLocked(it.e) {
			out = append(out, outItem{live: it.raw, liveSeq: it.e.Seq})
		}
	}
	s.early = nil
	s.mu.Unlock()
	for _, it := range out {
		s.c.enqueue(it)
	}
	if s.pumping.CompareAndSwap(false, true) {
		go s.pump()
	}
}

// close ends the session: the pump stops, the consumer's ack floor and the
// mirror get the final cursor.
func (s *session) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	if s.ackTimer != nil {
		s.ackTimer.Stop()
	}
	s.mu.Unlock()
	s.ctx.close()
	go func() {
		defer close(s.done)
		s.g.router.leave(s)
		defer s.g.router.left(s)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.syncConsumer(ctx)
	}()
}

// onAck handles the device's confirmation of whole batches and of single
// messages.
func (s *session) onAck(batchIDs, seqs []uint64) error {
	s.mu.Lock()
	r := s.led.Ack(nil, batchIDs, seqs)
	if r.Moved {
		s.cursorMovedLocked()
	}
	wantTail := s.led.Ahead() > 0
	s.mu.Unlock()
	s.g.events.delivered(s.uid, s.device, r.Receipts)
	if r.Moved || wantTail || r.Batches > 0 {
		s.poke()
	}
	if len(r.UnknownBatches) > 0 || len(r.UnknownSeqs) > 0 {
		s.g.metrics.badAcks.Inc()
		return wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT,
			"ack of batches %v / messages %v that were not sent on this connection or are confirmed already; nothing else changed", r.UnknownBatches, r.UnknownSeqs)
	}
	return nil
}

// onAckRange confirms every entry up to upTo, fetched or not (a client that
// chose not to fetch an old backlog). It is recorded like any confirmation.
func (s *session) onAckRange(upTo uint64) error {
	if last := s.g.parts.get(s.p).lastSeq; upTo > last {
		// The cached head may be a refresh behind: ask the stream.
		ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
		st, err := s.g.js.Stream(ctx, streams.InboxStream(s.p))
		cancel()
		if err != nil {
			return wire.Errorf(pb.ErrorCode_UNAVAILABLE, "cannot check the inbox head now; retry")
		}
		if last = st.CachedInfo().State.LastSeq; upTo > last {
			return wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "ack_range up to %d is beyond the inbox (last entry %d)", upTo, last)
		}
	}
	s.mu.Lock()
	if upTo <= s.led.Cursor() {
		s.mu.Unlock()
		return nil
	}
	r, jumped := s.led.AckRange(nil, upTo)
	if jumped {
		// The backfill resumes after the range; the consumer is moved there
		// once the cursor stands at it.
		s.tail.skipped()
	}
	if r.Moved {
		s.cursorMovedLocked()
	}
	s.mu.Unlock()
	s.g.metrics.ackRanges.Inc()
	s.g.events.delivered(s.uid, s.device, r.Receipts)
	s.poke()
	return nil
}

// cursorMovedLocked does what a moved cursor implies: the consumer's
// deliveries up to it are acknowledged and the mirror is marked.
func (s *session) cursorMovedLocked() {
	c := s.led.Cursor()
	if reply := s.tail.ackUpTo(c); reply != "" {
		s.cons.req(opAck)
		_ = s.cons.ack(reply) // a lost ack is made good by the next one (AckPolicy all) or, at the next login, by the mirrored cursor
	}
	s.g.mirror.mark(store.DeviceCursor{UID: s.uid, Device: s.device, Consumer: s.consumer, AckSeq: c, Epoch: s.epoch.Load()})
}

// onLive sends a live entry now unless backfill already has it.
func (s *session) onLive(raw []byte, e wire.Entry) {
	le := ledger.Entry{Seq: e.Seq, Message: !e.Event, Info: ledger.Info{Conv: e.ConvID, ConvSeq: e.ConvSeq, Sender: e.SenderUID}}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if !s.started {
		s.early = append(s.early, earlyLive{raw: raw, e: le})
		s.mu.Unlock()
		return
	}
	ok := s.acceptLiveLocked(le)
	s.mu.Unlock()
	if ok {
		s.c.enqueue(outItem{live: raw, liveSeq: e.Seq})
	}
}

// acceptLiveLocked records a live entry about to go out. It reports false
// when it does not go: the backfill covered it, it went out already, or
// the device owes too many confirmations.
func (s *session) acceptLiveLocked(e ledger.Entry) bool {
	if e.Seq <= s.led.Covered() {
		return false
	}
	if s.led.Unconfirmed() >= maxUnconfirmed {
		// The device is not confirming: stop adding to what it owes us.
		// The entry is not dropped: the tail read delivers it once the
		// device confirms (or on its next login).
		s.tail.stale()
		s.g.metrics.liveDeferred.Inc()
		return false
	}
	if !s.led.Live(e) {
		return false
	}
	s.tail.stale() // the stream grew: the tail has to be read to cover it
	return true
}

// liveBatch registers a live batch about to be written.
func (s *session) liveBatch(seqs []uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armAckTimerLocked(s.g.opts.AckTimeout)
	return s.led.LiveBatch(seqs, time.Now())
}

// tailCheck makes the session read its tail again (after a NATS reconnect,
// live entries may have been missed).
func (s *session) tailCheck() {
	s.mu.Lock()
	s.tail.stale()
	s.mu.Unlock()
	s.poke()
}

// pending estimates the entries the device has not confirmed: the
// consumer's count, less what the device confirmed beyond the consumer's
// position during an archive catch-up (the consumer is not moved until
// its end, syncConsumer), counted in the archive that served it.
func (s *session) pending(ctx context.Context) uint64 {
	ci, err := s.cons.info(ctx)
	if err != nil {
		return 0
	}
	n := ci.NumPending + uint64(ci.NumAckPending)
	s.mu.Lock()
	cursor := s.led.Cursor()
	s.mu.Unlock()
	if from := ci.Delivered.Stream; cursor > from && n > 0 {
		confirmed, err := s.g.st.ArchivedBetween(ctx, s.uid, from, cursor)
		if err != nil {
			return n
		}
		n -= min(n, confirmed)
	}
	return n
}
