package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// A session is the read side of one device's connection: it moves the
// device's inbox from its cursor to the device, in backfill pages and on the
// live lane, and moves the cursor when the device confirms.
//
// State, in inbox sequence numbers of the user's partition:
//
//	cursor   every entry of the device's inbox <= cursor is confirmed (the
//	         durable consumer's ack floor, mirrored to Postgres)
//	covered  every entry <= covered was sent to the device (or is not the
//	         device's): backfill has passed it
//	unconf   entries sent and not yet confirmed (backfill or live)
//	sentLive entries above covered already sent on the live lane; backfill
//	         skips them when it gets there
//
// so cursor = min(covered, min(unconf)-1) and it only ever grows on acks.
//
// Backfill reads older ranges from the Postgres archive index (cost follows
// the device's own backlog) and the recent tail from the durable consumer
// (which then scans only that tail). The consumer is positioned by
// ResetConsumerToSequence only when cursor == covered, i.e. at a confirmed
// position, so its ack floor never runs ahead of what the device stored.
type session struct {
	g        *Gateway
	c        *Conn
	id       string
	uid      int64
	device   string
	p        int
	consumer string
	prof     profile
	limiter  *rate.Limiter // the device's backfill rate

	cons jetstream.Consumer

	ctx     context.Context
	cancel  context.CancelFunc
	wake    chan struct{} // pokes the pump
	pumping atomic.Bool   // a pump goroutine runs
	done    chan struct{} // closed when the session ended and its cursor is saved

	mu         sync.Mutex
	cursor     uint64
	covered    uint64
	unconf     map[uint64]struct{}
	info       map[uint64]confirmed // unconfirmed messages: for delivered receipts
	sentLive   map[uint64]struct{}
	batches    map[uint64]sentBatch
	nextBatch  uint64
	pages      int       // backfill batches awaiting confirmation
	sentPages  int       // backfill batches sent in this session
	consumerAt uint64    // the consumer's next delivery (0: must be repositioned)
	ackedFloor uint64    // the consumer's ack floor as last set by us
	lastSync   time.Time // last consumer reposition in archive mode
	tailMsgs   []tailMsg // consumer deliveries not yet acknowledged
	tailLeft   uint64    // consumer NumPending after the last fetch
	tailKnown  bool      // tailLeft is current
	verified   bool      // a fetch found the tail empty since tailKnown was last set from NumPending
	nextDseq   uint64    // the consumer sequence the next delivery must have (0: unknown)
	needFinal  bool      // a has_more=true batch went out: end the backfill with has_more=false
	started    bool      // the welcome is queued: live entries may go out
	early      []outItem // live entries that arrived before that
	closed     bool
}

type sentBatch struct {
	seqs     []uint64
	backfill bool
}

type tailMsg struct {
	seq uint64
	msg jetstream.Msg
}

// errRetry: the step could not make progress now and should be tried again
// after a pause (not an error worth a log line).
var errRetry = errors.New("retry")

// maxUnconfirmed bounds the messages a session keeps sending live without
// confirmation.
const maxUnconfirmed = 10000

// startSession opens the device's cursor and registers the session; it
// returns the welcome fields.
func (g *Gateway) startSession(ctx context.Context, c *Conn) (*session, uint64, error) {
	prof := profiles[c.kind]
	s := &session{
		g: g, c: c, id: nuid.Next(), uid: c.id.UID, device: c.id.Device,
		p:        ids.Partition(c.id.UID, g.opts.Layout.InboxPartitions),
		consumer: streams.DeviceConsumer(c.id.UID, c.id.Device),
		prof:     prof,
		limiter:  rate.NewLimiter(prof.rate, prof.burst),
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		unconf:   map[uint64]struct{}{},
		info:     map[uint64]confirmed{},
		sentLive: map[uint64]struct{}{},
		batches:  map[uint64]sentBatch{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	c.setSession(s) // before live entries can arrive: the writer registers their batches with it

	// Register first: the live lane must be listening before the cursor is
	// read, or an entry published in between would be neither live nor
	// (if the tail was read just before it) backfilled... it would be
	// backfilled later; registering first keeps the common path exact.
	replaced, err := g.router.register(s)
	if err != nil {
		c.setSession(nil)
		return nil, 0, err
	}
	for _, o := range replaced {
		o.c.replaced()
		select {
		case <-o.done: // its final cursor is saved before we read it
		case <-time.After(2 * time.Second):
		}
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	pending, err := s.open(cctx)
	if err != nil {
		g.router.unregister(s)
		c.setSession(nil)
		s.cancel()
		close(s.done)
		return nil, 0, err
	}
	return s, pending, nil
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
}

// State returns a snapshot of the session's delivery state: the one way
// for the rest of the gateway to read it.
func (s *session) State() SessionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SessionState{UID: s.uid, Device: s.device, Consumer: s.consumer, Cursor: s.cursor, Covered: s.covered,
		Unconfirmed: len(s.unconf), SentLive: len(s.sentLive), Pages: s.pages, ConsumerAt: s.consumerAt,
		TailLeft: s.tailLeft, TailKnown: s.tailKnown, Started: s.started}
}

// start lets live entries and the backfill flow, after the welcome.
func (s *session) start() {
	s.mu.Lock()
	s.started = true
	early := s.early
	s.early = nil
	s.mu.Unlock()
	for _, it := range early {
		s.c.enqueue(it)
	}
	if s.pumping.CompareAndSwap(false, true) {
		go s.pump()
	}
}

// open finds or creates the device's consumer, resets it so unacknowledged
// entries come back at once, and sets cursor and covered.
func (s *session) open(ctx context.Context) (uint64, error) {
	g := s.g
	stream := streams.InboxStream(s.p)
	// The Postgres mirror and the consumer are looked up at once: a login
	// waits for one round trip instead of two.
	type mirrorResult struct {
		c     store.DeviceCursor
		found bool
		err   error
	}
	mirrorCh := make(chan mirrorResult, 1)
	go func() {
		c, found, err := g.st.GetDeviceCursor(ctx, s.uid, s.device)
		mirrorCh <- mirrorResult{c, found, err}
	}()
	var err error
	s.cons, err = g.bjs.Consumer(ctx, stream, s.consumer)
	mr := <-mirrorCh
	if mr.err != nil {
		return 0, mr.err
	}
	mirror, found := mr.c, mr.found
	created := false // the cached info predates a move: read it again
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		created = true
		// First login of this device, or its consumer was reaped or lost:
		// start after the mirrored cursor (repeats, never skips).
		var cfg jetstream.ConsumerConfig
		var cerr error
		if found {
			cfg, cerr = streams.DeviceConsumerConfig(s.p, s.uid, s.device, mirror.AckSeq+1, g.opts.DeviceIdleReap)
			g.metrics.consumersRecreated.Inc()
		} else {
			// A new device: the last NewDeviceWindow of the inbox, capped
			// below (newDeviceCap); older history comes by conversation pulls.
			cfg, cerr = streams.NewDeviceConsumerConfig(s.p, s.uid, s.device, time.Now().Add(-g.opts.NewDeviceWindow), g.opts.DeviceIdleReap)
		}
		if cerr != nil {
			return 0, cerr
		}
		s.cons, err = g.bjs.CreateConsumer(ctx, stream, cfg)
		if err == nil && !found {
			err = s.newDeviceCap(ctx, stream)
		}
		if errors.Is(err, jetstream.ErrConsumerExists) {
			s.cons, err = g.bjs.Consumer(ctx, stream, s.consumer) // another gateway was quicker
		}
	}
	if err != nil {
		return 0, fmt.Errorf("device consumer %s: %w", s.consumer, err)
	}
	// Unacknowledged deliveries (of an earlier session) come back at once
	// after a reset, instead of after ack_wait. A consumer with none needs
	// no reset: skipping it spares the server a state file write, which it
	// does inline for every reset (a reconnect wave measured 800 logins/s
	// with the reset, most of the NATS server's CPU in writing those files).
	info := s.cons.CachedInfo()
	nextDseq := info.Delivered.Consumer + 1
	resetSeq := uint64(0)
	if created || info.NumAckPending > 0 || info.Delivered.Stream != info.AckFloor.Stream {
		r, err := g.bjs.ResetConsumer(ctx, stream, s.consumer)
		if err != nil {
			return 0, fmt.Errorf("reset consumer %s: %w", s.consumer, err)
		}
		info, resetSeq, nextDseq = r.ConsumerInfo, r.ResetSeq, 1
	}
	cursor := info.AckFloor.Stream
	if found && mirror.AckSeq > cursor {
		// The consumer knows less than the mirror (recreated from an older
		// mirror by another gateway, or restored): the mirror is a
		// confirmed position too.
		if r, err := g.bjs.ResetConsumerToSequence(ctx, stream, s.consumer, mirror.AckSeq+1); err == nil {
			cursor, resetSeq, nextDseq = mirror.AckSeq, r.ResetSeq, 1
		}
	}
	s.mu.Lock()
	s.cursor, s.covered, s.ackedFloor = cursor, cursor, cursor
	s.consumerAt = 0
	if info.Delivered.Stream == cursor || resetSeq == cursor+1 {
		s.consumerAt = cursor + 1
	}
	s.tailLeft, s.tailKnown, s.verified = info.NumPending, s.consumerAt == cursor+1, false
	s.nextDseq = nextDseq // a reset restarts delivery sequences
	s.mu.Unlock()
	g.mirror.mark(store.DeviceCursor{UID: s.uid, Device: s.device, Consumer: s.consumer, AckSeq: cursor})
	return info.NumPending, nil
}

// newDeviceCap moves a new device's cursor up so that at most
// NewDeviceMax entries are ahead of it.
func (s *session) newDeviceCap(ctx context.Context, stream string) error {
	nth, ok, err := s.g.st.NthNewestSeq(ctx, s.uid, s.g.opts.NewDeviceMax)
	if err != nil || !ok {
		return err
	}
	if floor := s.cons.CachedInfo().AckFloor.Stream; nth-1 > floor {
		_, err = s.g.bjs.ResetConsumerToSequence(ctx, stream, s.consumer, nth)
	}
	return err
}

// poke makes the pump look again (an ack, a live entry to cover, a NATS
// reconnect), starting it if it is not running: a caught-up session holds
// no goroutine.
func (s *session) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if s.pumping.Load() {
		return // the running pump takes the wake (sleep looks once more before it ends)
	}
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if started && s.pumping.CompareAndSwap(false, true) {
		s.pumping.Store(true)
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
	s.mu.Unlock()
	s.cancel()
	go func() {
		defer close(s.done)
		s.g.router.unregister(s)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.syncConsumer(ctx, true)
	}()
}

// onAck handles the device's confirmation of whole batches and of single
// messages.
func (s *session) onAck(batchIDs, seqs []uint64) error {
	s.mu.Lock()
	var unknown, unknownSeqs []uint64
	var done []confirmed
	confirm := func(seq uint64) {
		delete(s.unconf, seq)
		if in, ok := s.info[seq]; ok {
			done = append(done, in)
			delete(s.info, seq)
		}
	}
	for _, seq := range seqs {
		if _, ok := s.unconf[seq]; !ok {
			unknownSeqs = append(unknownSeqs, seq)
			continue
		}
		confirm(seq)
	}
	for _, id := range batchIDs {
		b, ok := s.batches[id]
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		delete(s.batches, id)
		for _, seq := range b.seqs {
			confirm(seq)
		}
		if b.backfill {
			s.pages--
		}
	}
	moved := s.advanceLocked()
	wantTail := len(s.sentLive) > 0
	s.mu.Unlock()
	s.g.deliveredReceipts(s.uid, s.device, done)
	if moved || wantTail || len(batchIDs) > len(unknown) {
		s.poke()
	}
	if len(unknown) > 0 || len(unknownSeqs) > 0 {
		s.g.metrics.badAcks.Inc()
		return wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT,
			"ack of batches %v / messages %v that were not sent on this connection or are confirmed already; nothing else changed", unknown, unknownSeqs)
	}
	return nil
}

// advanceLocked recomputes the cursor; it acknowledges consumer deliveries
// up to it and marks the mirror. It reports whether the cursor moved.
func (s *session) advanceLocked() bool {
	c := s.covered
	for seq := range s.unconf {
		if seq-1 < c {
			c = seq - 1
		}
	}
	if c <= s.cursor {
		return false
	}
	s.cursor = c
	// AckPolicy all: acknowledging the newest delivery at or below the
	// cursor moves the consumer's ack floor there.
	i, found := slices.BinarySearchFunc(s.tailMsgs, c, func(t tailMsg, seq uint64) int {
		switch {
		case t.seq < seq:
			return -1
		case t.seq > seq:
			return 1
		}
		return 0
	})
	if !found {
		i--
	}
	if i >= 0 {
		_ = s.tailMsgs[i].msg.Ack()
		s.ackedFloor = s.tailMsgs[i].seq
		s.tailMsgs = s.tailMsgs[i+1:]
	}
	s.g.mirror.mark(store.DeviceCursor{UID: s.uid, Device: s.device, Consumer: s.consumer, AckSeq: s.cursor})
	return true
}

// onLive sends a live entry now unless backfill already has it.
func (s *session) onLive(raw []byte, e wire.Entry) {
	seq := e.Seq
	s.mu.Lock()
	if s.closed || seq <= s.covered {
		s.mu.Unlock()
		return
	}
	if len(s.unconf) >= maxUnconfirmed {
		// The device is not confirming: stop adding to what it owes us.
		// The entry is not dropped: the tail read delivers it once the
		// device confirms (or on its next login).
		s.tailKnown = false
		s.verified = false
		s.mu.Unlock()
		s.g.metrics.liveDeferred.Inc()
		return
	}
	if _, dup := s.sentLive[seq]; dup {
		s.mu.Unlock()
		return
	}
	s.sentLive[seq] = struct{}{}
	s.unconf[seq] = struct{}{}
	if !e.Event {
		s.info[seq] = confirmed{conv: e.ConvID, convSeq: e.ConvSeq, sender: e.SenderUID}
	}
	s.tailKnown = false
	s.verified = false // the stream grew: the tail has to be read to cover it
	if !s.started {
		s.early = append(s.early, outItem{live: raw, liveSeq: seq})
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.c.enqueue(outItem{live: raw, liveSeq: seq})
}

// liveBatch registers a live batch about to be written.
func (s *session) liveBatch(seqs []uint64) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextBatch++
	s.batches[s.nextBatch] = sentBatch{seqs: slices.Clone(seqs)}
	return s.nextBatch
}

// syncConsumer moves the consumer's ack floor up to the cursor where acks
// did not (entries served from the archive were never delivered by it).
// Outside of final it runs at most once a second per session.
func (s *session) syncConsumer(ctx context.Context, final bool) {
	s.mu.Lock()
	c := s.cursor
	due := c > s.ackedFloor && (final || time.Since(s.lastSync) >= time.Second)
	s.mu.Unlock()
	if !due {
		return
	}
	if _, err := s.g.bjs.ResetConsumerToSequence(ctx, streams.InboxStream(s.p), s.consumer, c+1); err != nil {
		s.g.log.Debug("move consumer to cursor", zap.String("consumer", s.consumer), zap.Error(err))
		return
	}
	s.mu.Lock()
	s.ackedFloor, s.lastSync = max(s.ackedFloor, c), time.Now()
	s.nextDseq = 1
	if s.consumerAt != 0 {
		s.consumerAt = c + 1
		s.tailKnown = false
		s.verified = false
		s.tailMsgs = s.tailMsgs[:0]
	}
	s.mu.Unlock()
}

// pump produces backfill pages while there is backlog and room in the
// window; it sleeps when caught up until poked (an ack, a live entry to
// cover, a NATS reconnect).
func (s *session) pump() {
	for {
		select {
		case <-s.ctx.Done():
			return
		default:
		}
		s.mu.Lock()
		full := s.pages >= s.prof.window
		s.mu.Unlock()
		if full {
			if !s.sleep() {
				return
			}
			continue
		}
		more, err := s.step()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			if !errors.Is(err, errRetry) {
				s.g.log.Warn("backfill step", zap.Int64("uid", s.uid), zap.String("device", s.device), zap.Error(err))
			}
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		if !more && !s.sleep() {
			return
		}
	}
}

// sleep reports whether the pump goes on: it does if it was poked
// meanwhile; otherwise it ends (the next poke starts a new one).
func (s *session) sleep() bool {
	select {
	case <-s.ctx.Done():
		return false
	case <-s.wake:
		return true
	default:
	}
	s.pumping.Store(false)
	// A poke between the check above and the store saw a running pump and
	// started none: look once more.
	select {
	case <-s.wake:
		return s.pumping.CompareAndSwap(false, true)
	default:
		return false
	}
}

// step sends at most one backfill page. It reports whether it should be
// called again right away.
func (s *session) step() (bool, error) {
	ctx := s.ctx
	info := s.g.parts.get(s.p)
	s.mu.Lock()
	covered, cursor := s.covered, s.cursor
	s.mu.Unlock()

	// What the archive holds is read from it: one indexed range read with
	// the bodies, where the consumer would cost a fetch, a bodies query
	// and, per delivery, a rewrite of its state file by the server (in a
	// login storm most of the NATS server's CPU). The consumer reads only
	// the tail the archiver has not copied yet.
	if covered < info.archived {
		s.syncConsumer(ctx, false)
		return s.archivePage(ctx, covered, info)
	}
	// The tail, from the consumer. It must deliver from covered+1; it can
	// only be put there at a confirmed position.
	s.mu.Lock()
	at := s.consumerAt
	s.mu.Unlock()
	if at != covered+1 {
		// The consumer may only be put at a confirmed position: at the
		// cursor, from where entries up to covered are read again and
		// skipped. While backfill pages are out (the end of an archive
		// drain), wait for their confirmation instead: it brings the
		// cursor to covered. Also wait when the stretch is long (a live
		// entry with much traffic after it).
		s.mu.Lock()
		inFlight := s.pages
		s.mu.Unlock()
		if cursor < covered && (inFlight > 0 || covered-cursor > uint64(s.g.opts.TailScan)) {
			// Nothing more comes before the device confirms. If what it
			// owes is not backfill (a live entry it holds back, waiting
			// for earlier messages of its conversation), say so
			// (has_more=false): it stops waiting and confirms.
			if inFlight == 0 {
				s.finish()
			}
			return false, nil
		}
	}
	if at != covered+1 && at != cursor+1 {
		r, err := s.g.bjs.ResetConsumerToSequence(ctx, streams.InboxStream(s.p), s.consumer, cursor+1)
		if err != nil {
			return false, s.recover(ctx, err)
		}
		s.mu.Lock()
		s.consumerAt, s.ackedFloor, s.nextDseq = cursor+1, cursor, 1
		s.tailLeft, s.tailKnown, s.verified = r.NumPending, true, false
		s.tailMsgs = s.tailMsgs[:0]
		s.mu.Unlock()
	}
	return s.tailPage(ctx)
}

func (s *session) archivePage(ctx context.Context, covered uint64, info partInfo) (bool, error) {
	first := s.firstPage()
	n := s.prof.pageSize
	if first {
		n = min(n, firstPageSize)
	}
	if err := s.wait(ctx, n); err != nil {
		return false, err
	}
	release, err := s.g.pageGate.acquire(ctx, first)
	if err != nil {
		return false, err
	}
	defer release()
	pg := getPage()
	pg.msgs, err = s.g.st.ArchivePage(ctx, pg.msgs[:0], s.uid, covered, info.archived, n)
	if err != nil {
		putPage(pg)
		return false, err
	}
	s.g.metrics.pages.WithLabelValues("archive").Inc()
	upTo := info.archived
	if len(pg.msgs) == n {
		upTo = pg.msgs[n-1].Seq
	}
	return s.sendPage(pg, covered, upTo, true)
}

func (s *session) tailPage(ctx context.Context) (bool, error) {
	s.mu.Lock()
	left, known := s.tailLeft, s.tailKnown
	s.mu.Unlock()
	if !known {
		ci, err := s.cons.Info(ctx)
		if err != nil {
			return false, s.recover(ctx, err)
		}
		left = ci.NumPending
	}
	if left == 0 {
		s.mu.Lock()
		verified, covered := s.verified, s.covered
		s.mu.Unlock()
		if !verified {
			// NumPending has been seen to lag behind the stream under
			// faults: before calling the device caught up, ask the stream
			// for the inbox's newest entry (a direct get by subject, no
			// pull request that could outlive the session).
			last, err := s.lastEntrySeq(ctx)
			if err != nil {
				return false, err
			}
			verified = last <= covered
			s.mu.Lock()
			s.verified = verified
			s.mu.Unlock()
		}
		if verified {
			s.finish()
			return false, nil
		}
		left = 1 // there is more than NumPending said: read it
	}
	first := s.firstPage()
	n := min(int(left), s.prof.pageSize)
	if first {
		n = min(n, firstPageSize)
	}
	if err := s.wait(ctx, n); err != nil {
		return false, err
	}
	release, err := s.g.pageGate.acquire(ctx, first)
	if err != nil {
		return false, err
	}
	defer release()
	// NumPending said n are there: Fetch returns as soon as it has them.
	batch, err := s.cons.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		return false, s.recover(ctx, err)
	}
	pg := getPage()
	var delivered []tailMsg
	s.mu.Lock()
	last, dseq := s.covered, s.nextDseq
	s.mu.Unlock()
	orphans := false
	for m := range batch.Messages() {
		md, err := m.Metadata()
		if err != nil {
			continue
		}
		// Every delivery of the consumer has the next consumer sequence. A
		// jump means deliveries went to a pull request nobody read (an
		// expiring fetch, a replaced session): those entries count as
		// delivered and an ack above them would confirm them. Never: drop
		// this fetch and put the consumer back at the cursor.
		if dseq != 0 && md.Sequence.Consumer != dseq {
			orphans = true
		}
		dseq = md.Sequence.Consumer + 1
		if orphans {
			continue
		}
		left = md.NumPending
		if md.Sequence.Stream <= last {
			continue // a redelivery of something already covered
		}
		last = md.Sequence.Stream
		delivered = append(delivered, tailMsg{md.Sequence.Stream, m})
		var e pb.InboxEntry
		if err := proto.Unmarshal(m.Data(), &e); err != nil {
			s.g.log.Error("undecodable inbox entry", zap.String("subject", m.Subject()), zap.Uint64("seq", md.Sequence.Stream))
			continue
		}
		m := wire.Message{Seq: md.Sequence.Stream, MsgID: e.MsgId, ConvID: e.ConvId, ConvSeq: e.ConvSeq,
			SenderUID: e.SenderUid, Kind: e.Kind, CreatedAtMs: e.CreatedAtMs}
		if ev := e.GetEvent(); ev != nil {
			m = wire.Message{Seq: md.Sequence.Stream, ConvID: ev.GetConvId(), EventType: uint32(ev.GetType()),
				EventUpTo: ev.GetUpToConvSeq(), EventPeer: ev.GetPeerUid()}
		}
		pg.msgs = append(pg.msgs, m)
	}
	if err := batch.Error(); err != nil && len(delivered) == 0 && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
		putPage(pg)
		return false, s.recover(ctx, err)
	}
	if orphans {
		s.g.metrics.orphans.Inc()
		s.mu.Lock()
		s.consumerAt, s.tailKnown, s.verified, s.nextDseq = 0, false, false, 0
		s.mu.Unlock()
		putPage(pg)
		return true, nil // the next step repositions the consumer at the cursor
	}
	if len(delivered) == 0 {
		// NumPending said there was more, the fetch brought nothing (it
		// timed out, or the consumer is at max_ack_pending): try again
		// shortly rather than wait for a poke that may not come.
		s.mu.Lock()
		s.tailKnown = false
		s.verified = false
		s.mu.Unlock()
		putPage(pg)
		return false, errRetry
	}
	s.g.metrics.pages.WithLabelValues("tail").Inc()
	s.mu.Lock()
	covered := s.covered
	s.tailMsgs = append(s.tailMsgs, delivered...)
	s.consumerAt, s.tailLeft, s.tailKnown, s.verified = last+1, left, true, false
	s.nextDseq = dseq
	s.mu.Unlock()
	// Bodies of what the device does not have from the live lane.
	if err := s.fillBodies(ctx, pg); err != nil {
		putPage(pg)
		return false, err
	}
	more, err := s.sendPage(pg, covered, last, left > 0)
	return more || left > 0, err
}

// firstPage reports whether the next backfill page is the session's first.
func (s *session) firstPage() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sentPages == 0
}

// lastEntrySeq returns the stream sequence of the newest entry of the
// user's inbox (0: none).
func (s *session) lastEntrySeq(ctx context.Context) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m, err := s.g.bnc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+streams.InboxStream(s.p)+"."+streams.InboxSubject(s.p, s.uid), nil)
	if err != nil {
		return 0, fmt.Errorf("newest inbox entry: %w", err)
	}
	switch m.Header.Get("Status") {
	case "":
	case "404":
		return 0, nil
	default:
		return 0, fmt.Errorf("newest inbox entry: status %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
	}
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("newest inbox entry: bad %s header %q", jetstream.SequenceHeader, m.Header.Get(jetstream.SequenceHeader))
	}
	return seq, nil
}

func (s *session) fillBodies(ctx context.Context, pg *page) error {
	s.mu.Lock()
	need := pg.idx[:0]
	for i := range pg.msgs {
		if _, live := s.sentLive[pg.msgs[i].Seq]; !live && pg.msgs[i].EventType == 0 {
			need = append(need, i)
		}
	}
	s.mu.Unlock()
	pg.idx = need
	return s.g.bodies.fill(ctx, len(need),
		func(i int) int64 { return pg.msgs[need[i]].MsgID },
		func(i int, t string) { pg.msgs[need[i]].Text = t })
}

// sendPage commits a page into the session state (covered moves to upTo;
// entries already sent live are dropped from it) and queues it.
func (s *session) sendPage(pg *page, from, upTo uint64, hasMore bool) (bool, error) {
	s.mu.Lock()
	if s.closed || s.covered != from {
		// Covered moved meanwhile (an ack_range): read again from there.
		closed := s.closed
		s.mu.Unlock()
		putPage(pg)
		return !closed, nil
	}
	kept := pg.msgs[:0]
	pg.seqs = pg.seqs[:0]
	for _, m := range pg.msgs {
		if m.Seq <= from || m.Seq > upTo {
			continue
		}
		if _, live := s.sentLive[m.Seq]; live {
			continue
		}
		kept = append(kept, m)
		pg.seqs = append(pg.seqs, m.Seq)
	}
	pg.msgs = kept
	for seq := range s.sentLive {
		if seq <= upTo {
			delete(s.sentLive, seq)
		}
	}
	s.covered = upTo
	if len(pg.msgs) == 0 {
		// Nothing of the device's in this range (or all of it went live):
		// coverage alone may move the cursor.
		moved := s.advanceLocked()
		s.mu.Unlock()
		putPage(pg)
		_ = moved
		return true, nil
	}
	for i, seq := range pg.seqs {
		s.unconf[seq] = struct{}{}
		if m := &pg.msgs[i]; m.EventType == 0 {
			s.info[seq] = confirmed{conv: m.ConvID, convSeq: m.ConvSeq, sender: m.SenderUID}
		}
	}
	s.nextBatch++
	s.batches[s.nextBatch] = sentBatch{seqs: slices.Clone(pg.seqs), backfill: true}
	s.pages++
	s.sentPages++
	s.needFinal = hasMore
	pg.hdr = wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: s.nextBatch, HasMore: hasMore}
	s.mu.Unlock()
	n := len(pg.msgs) // pg belongs to the writer once queued
	if !s.c.enqueueBackfill(pg) {
		return false, errors.New("connection closed")
	}
	s.g.metrics.backfillMessages.Add(float64(n))
	return true, nil
}

// finish tells the device that no more backfill comes for now (the last
// page said more): the backfill is done, or waits for confirmations.
func (s *session) finish() {
	s.mu.Lock()
	need := s.needFinal
	s.needFinal = false
	s.mu.Unlock()
	if need {
		pg := getPage()
		pg.hdr = wire.BatchHeader{Lane: pb.Lane_BACKFILL}
		s.c.enqueueBackfill(pg)
	}
}

// wait applies the device's and the user's backfill rates.
func (s *session) wait(ctx context.Context, n int) error {
	if err := s.limiter.WaitN(ctx, min(n, s.prof.burst)); err != nil {
		return err
	}
	if ul := s.g.router.limiter(s.uid); ul != nil {
		return ul.WaitN(ctx, min(n, s.g.opts.UserBackfillBurst))
	}
	return nil
}

// recover handles a consumer that vanished under the session (reaped while
// idle, lost with a server): recreate it at the cursor and go on.
func (s *session) recover(ctx context.Context, err error) error {
	if !errors.Is(err, jetstream.ErrConsumerNotFound) && !strings.Contains(err.Error(), "consumer not found") {
		return err
	}
	s.mu.Lock()
	cursor := s.cursor
	s.mu.Unlock()
	cfg, cerr := streams.DeviceConsumerConfig(s.p, s.uid, s.device, cursor+1, s.g.opts.DeviceIdleReap)
	if cerr != nil {
		return cerr
	}
	cons, cerr := s.g.bjs.CreateOrUpdateConsumer(ctx, streams.InboxStream(s.p), cfg)
	if cerr != nil {
		return fmt.Errorf("recreate consumer after %v: %w", err, cerr)
	}
	s.g.metrics.consumersRecreated.Inc()
	s.mu.Lock()
	s.cons = cons
	s.consumerAt, s.ackedFloor, s.tailKnown, s.verified, s.nextDseq = 0, cursor, false, false, 0
	s.tailMsgs = s.tailMsgs[:0]
	s.mu.Unlock()
	return nil
}

// page is one backfill batch on its way to the writer (pooled).
type page struct {
	hdr  wire.BatchHeader
	msgs []wire.Message
	seqs []uint64
	idx  []int
}

var pagePool = sync.Pool{New: func() any { return new(page) }}

func getPage() *page { return pagePool.Get().(*page) }

func putPage(pg *page) {
	for i := range pg.msgs {
		pg.msgs[i].Text = "" // do not pin bodies
	}
	pg.msgs, pg.seqs, pg.idx = pg.msgs[:0], pg.seqs[:0], pg.idx[:0]
	pg.hdr = wire.BatchHeader{}
	pagePool.Put(pg)
}

// tailCheck makes the session read its tail again (after a NATS reconnect,
// live entries may have been missed).
func (s *session) tailCheck() {
	s.mu.Lock()
	s.tailKnown = false
	s.verified = false
	s.mu.Unlock()
	s.poke()
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
	if upTo <= s.cursor {
		s.mu.Unlock()
		return nil
	}
	var done []confirmed
	for seq := range s.unconf {
		if seq <= upTo {
			delete(s.unconf, seq)
			if in, ok := s.info[seq]; ok {
				done = append(done, in)
				delete(s.info, seq)
			}
		}
	}
	for seq := range s.sentLive {
		if seq <= upTo {
			delete(s.sentLive, seq)
		}
	}
	for id, b := range s.batches {
		b.seqs = slices.DeleteFunc(b.seqs, func(seq uint64) bool { return seq <= upTo })
		if len(b.seqs) == 0 {
			delete(s.batches, id)
			if b.backfill {
				s.pages--
			}
		} else {
			s.batches[id] = b
		}
	}
	if upTo > s.covered {
		// The backfill resumes after the range; the consumer is moved there
		// once the cursor stands at it.
		s.covered = upTo
		s.consumerAt, s.tailKnown, s.verified = 0, false, false
		s.tailMsgs = s.tailMsgs[:0]
	}
	s.advanceLocked()
	s.mu.Unlock()
	s.g.metrics.ackRanges.Inc()
	s.g.deliveredReceipts(s.uid, s.device, done)
	s.poke()
	return nil
}

// pending estimates the entries the device has not confirmed.
func (s *session) pending(ctx context.Context) uint64 {
	ci, err := s.cons.Info(ctx)
	if err != nil {
		return 0
	}
	return ci.NumPending + uint64(ci.NumAckPending)
}

// sendNewest sends the newest page of the device's backlog first (offline
// too long): its entries are treated like live ones, so the background
// drain from the cursor skips them; the cursor still moves only over what
// is confirmed.
func (s *session) sendNewest(ctx context.Context) error {
	arch, err := s.g.st.ArchiveProgress(ctx) // fresh: the cached mark may be a refresh behind
	if err != nil {
		return err
	}
	s.mu.Lock()
	cursor := s.cursor
	s.mu.Unlock()
	pg := getPage()
	pg.msgs, err = s.g.st.NewestPage(ctx, pg.msgs[:0], s.uid, cursor, arch[s.p], s.prof.pageSize)
	if err != nil || len(pg.msgs) == 0 {
		putPage(pg)
		return err
	}
	s.mu.Lock()
	pg.seqs = pg.seqs[:0]
	for i := range pg.msgs {
		m := &pg.msgs[i]
		s.sentLive[m.Seq] = struct{}{}
		s.unconf[m.Seq] = struct{}{}
		if m.EventType == 0 {
			s.info[m.Seq] = confirmed{conv: m.ConvID, convSeq: m.ConvSeq, sender: m.SenderUID}
		}
		pg.seqs = append(pg.seqs, m.Seq)
	}
	s.nextBatch++
	s.batches[s.nextBatch] = sentBatch{seqs: slices.Clone(pg.seqs)}
	s.needFinal = true
	pg.hdr = wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: s.nextBatch, HasMore: true}
	s.mu.Unlock()
	if !s.c.enqueueBackfill(pg) {
		return errors.New("connection closed")
	}
	s.g.metrics.backfillMessages.Add(float64(len(pg.seqs)))
	return nil
}
