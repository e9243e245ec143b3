package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/natsconn"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// deviceConsumer is a device's durable consumer on its INBOX partition:
// the device cursor (its ack floor) and the reader of the inbox tail that
// the archive does not hold yet. It knows the JetStream API, its stream
// and name, and where the mirrored cursor is kept; nothing of the session
// or the gateway.
type deviceConsumer struct {
	*consumerEnv
	p       int
	uid     int64
	device  string
	stream  string
	name    string
	subject string
}

// consumerEnv is what the device consumers of a gateway share: one copy,
// not one per connected device.
type consumerEnv struct {
	js        jetstream.JetStream // on the backfill connection
	nc        *nats.Conn          // the same connection, for pulls and direct gets
	cursors   cursorStore
	epochs    epochStore // epoch.go
	parts     *partInfos // the cached stream epochs (epoch.go)
	opts      consumerOptions
	recreated prometheus.Counter     // consumers recreated from the mirror
	requests  *prometheus.CounterVec // the JetStream requests made, by op (metrics.go)
	log       *zap.Logger
}

// cursorStore is where a device consumer finds the mirrored cursor and a
// new device's starting point.
type cursorStore interface {
	GetDeviceCursor(ctx context.Context, uid int64, device string) (store.DeviceCursor, bool, error)
	NthNewestSeq(ctx context.Context, uid int64, n int) (uint64, bool, error)
	FirstSeqSince(ctx context.Context, uid int64, since time.Time, n int) (uint64, bool, error)
}

// epochStore is where a device consumer finds the stream epochs the
// syncer recorded (epoch.go).
type epochStore interface {
	ArchiveEpochs(ctx context.Context) (map[int]store.ArchiveEpoch, error)
}

type consumerOptions struct {
	idleReap        time.Duration // the consumer's InactiveThreshold
	newDeviceWindow time.Duration
	newDeviceMax    int
}

func newDeviceConsumer(g *Gateway, p int, uid int64, device string) *deviceConsumer {
	return &deviceConsumer{
		consumerEnv: g.consEnv,
		p:           p, uid: uid, device: device,
		stream:  streams.InboxStream(p),
		name:    streams.DeviceConsumer(uid, device),
		subject: streams.InboxSubject(p, uid),
	}
}

// req counts a JetStream request of kind op.
func (dc *deviceConsumer) req(op string) {
	if dc.requests != nil {
		dc.requests.WithLabelValues(op).Inc()
	}
}

// openedConsumer is where open found the consumer.
type openedConsumer struct {
	cursor   uint64 // the confirmed position: the ack floor, or the mirror when it knows more
	at       uint64 // the next delivery's stream seq (0: unknown, the consumer must be repositioned)
	pending  uint64 // NumPending
	nextDseq uint64 // the consumer sequence of the next delivery
	epoch    uint64 // the stream's epoch (epoch.go)
}

// mirrorRead is the device's mirrored cursor as read from Postgres.
type mirrorRead struct {
	c     store.DeviceCursor
	found bool
	err   error
}

// open finds or creates the consumer and resets it so that unacknowledged
// entries come back at once. pre is the mirror as the login read it with
// its summary (store.Login); nil makes open read it, at once with the
// consumer lookup (a login waits for one round trip instead of two).
func (dc *deviceConsumer) open(ctx context.Context, pre *mirrorRead) (openedConsumer, error) {
	mirrorCh := make(chan mirrorRead, 1)
	if pre != nil {
		mirrorCh <- *pre
	} else {
		go func() {
			c, found, err := dc.cursors.GetDeviceCursor(ctx, dc.uid, dc.device)
			mirrorCh <- mirrorRead{c, found, err}
		}()
	}
	// The info request is bounded on its own: an R1 consumer whose server
	// was just killed (or restarted without its in-memory state) may go
	// unanswered until the cluster notices, and a login that spent its
	// whole budget waiting would be refused again and again (the cluster
	// chaos run saw devices refused for minutes). Unanswered, it is treated
	// as offline: deleted through the meta layer and created again from
	// the mirror (repeats, never a skip); when even the delete goes
	// unanswered the login is refused UNAVAILABLE and the client retries.
	ictx, icancel := context.WithTimeout(ctx, consumerInfoTimeout)
	dc.req(opLookup)
	cs, err := dc.state(ictx)
	icancel()
	if offline(err) || (err != nil && natsconn.Unanswered(err) && ctx.Err() == nil) {
		err = dc.dropOffline(ctx, err) // ErrConsumerNotFound once dropped: created below
	}
	mr := <-mirrorCh
	if mr.err != nil {
		return openedConsumer{}, mr.err
	}
	mirror, found := mr.c, mr.found
	// A mirror of another stream epoch is a position in the current stream
	// only up to the epoch's start (epoch.go).
	useMirror := found && (errors.Is(err, jetstream.ErrConsumerNotFound) || (err == nil && mirror.AckSeq > cs.AckFloor.Stream))
	ep, mirror, eerr := dc.epochForOpen(ctx, mirror, useMirror)
	if eerr != nil {
		return openedConsumer{}, fmt.Errorf("device consumer %s: %w", dc.name, eerr)
	}
	created := false     // the cached info predates a move: read it again
	var since time.Time  // a new device's window
	var archStart uint64 // where it starts in the archive (0: by time in the stream)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		created = true
		// First login of this device, or its consumer was reaped or lost:
		// start after the mirrored cursor (repeats, never skips).
		var cfg jetstream.ConsumerConfig
		var cerr error
		if found {
			cfg, cerr = streams.DeviceConsumerConfig(dc.p, dc.uid, dc.device, mirror.AckSeq+1, dc.opts.idleReap)
			dc.recreated.Inc()
		} else {
			// A new device: the last NewDeviceWindow of the inbox, capped
			// below (newDeviceCap); older history comes by conversation pulls.
			// It starts where the window starts in the archive, the inbox
			// index's store of record, when the archive has entries in it: a
			// stream that lost entries (fenced) starts above them.
			since = time.Now().Add(-dc.opts.newDeviceWindow)
			a, ok, err := dc.cursors.FirstSeqSince(ctx, dc.uid, since, dc.opts.newDeviceMax)
			switch {
			case err != nil:
				return openedConsumer{}, err
			case ok:
				archStart = a
				cfg, cerr = streams.DeviceConsumerConfig(dc.p, dc.uid, dc.device, a, dc.opts.idleReap)
			default:
				cfg, cerr = streams.NewDeviceConsumerConfig(dc.p, dc.uid, dc.device, since, dc.opts.idleReap)
			}
		}
		if cerr != nil {
			return openedConsumer{}, cerr
		}
		dc.req(opCreate)
		var cons jetstream.Consumer
		cons, err = dc.js.CreateConsumer(ctx, dc.stream, cfg)
		if err == nil {
			cs = stateOf(cons.CachedInfo())
			if !found {
				err = dc.newDeviceCap(ctx, cs.AckFloor.Stream)
			}
		}
		if errors.Is(err, jetstream.ErrConsumerExists) {
			dc.req(opLookup)
			cs, err = dc.state(ctx) // another gateway was quicker
		}
	}
	if err != nil {
		return openedConsumer{}, fmt.Errorf("device consumer %s: %w", dc.name, err)
	}
	// Unacknowledged deliveries (of an earlier session) come back at once
	// after a reset, instead of after ack_wait. A consumer with none needs
	// no reset: skipping it spares the server a state file write, which it
	// does inline for every reset (a reconnect wave measured 800 logins/s
	// with the reset, most of the NATS server's CPU in writing those files).
	info := cs
	nextDseq := info.Delivered.Consumer + 1
	resetSeq := uint64(0)
	if created || info.NumAckPending > 0 || info.Delivered.Stream != info.AckFloor.Stream {
		dc.req(opReset)
		var err error
		if info, resetSeq, err = dc.reset(ctx, 0); err != nil {
			return openedConsumer{}, fmt.Errorf("reset consumer %s: %w", dc.name, err)
		}
		nextDseq = 1
	}
	cursor := info.AckFloor.Stream
	if found && cursor > mirror.AckSeq {
		// A purge of the stream (the syncer's trimmer: archived entries
		// older than the hot window) moves every consumer's ack floor to
		// just below the stream's new first entry, past entries the device
		// never confirmed (the archive holds them); so does creating a
		// consumer at a start below the first entry. A floor the device
		// moved is at an entry still in the stream: a floor below the first
		// entry is the mirror's (only confirmations move it) to say.
		first, err := dc.firstSeq(ctx)
		if err != nil {
			return openedConsumer{}, err
		}
		if cursor < first {
			cursor = mirror.AckSeq
		}
	}
	if found && mirror.AckSeq > cursor {
		// The consumer knows less than the mirror (recreated from an older
		// mirror by another gateway, or restored): the mirror is a
		// confirmed position too.
		dc.req(opResetTo)
		if r, rs, err := dc.reset(ctx, mirror.AckSeq+1); err == nil {
			cursor, resetSeq, nextDseq = mirror.AckSeq, rs, 1
			info.NumPending = r.NumPending // counted from the mirror, not from the floor before
		}
	}
	if archStart > 0 && archStart-1 < cursor {
		// The stream starts above the window's start in the archive (it
		// was fenced, or trimmed): the consumer's floor is below its first
		// entry, and the archive serves the rest.
		cursor = archStart - 1
	}
	o := openedConsumer{cursor: cursor, pending: info.NumPending, nextDseq: nextDseq, epoch: ep.epoch}
	if info.Delivered.Stream == cursor || resetSeq == cursor+1 {
		o.at = cursor + 1
	}
	return o, nil
}

// firstSeq returns the stream sequence of the oldest entry of the
// partition (the last sequence + 1 when the stream is empty).
func (dc *deviceConsumer) firstSeq(ctx context.Context) (uint64, error) {
	dc.req(opStreamInfo)
	s, err := dc.js.Stream(ctx, dc.stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", dc.stream, err)
	}
	return s.CachedInfo().State.FirstSeq, nil
}

// newDeviceCap moves a new device's cursor (its ack floor is floor) up so
// that at most NewDeviceMax entries are ahead of it.
func (dc *deviceConsumer) newDeviceCap(ctx context.Context, floor uint64) error {
	nth, ok, err := dc.cursors.NthNewestSeq(ctx, dc.uid, dc.opts.newDeviceMax)
	if err != nil || !ok {
		return err
	}
	if nth-1 > floor {
		dc.req(opResetTo)
		_, _, err = dc.reset(ctx, nth)
	}
	return err
}

// resetTo makes the consumer deliver from seq next, with everything below
// it acknowledged. Call it only with seq-1 confirmed. It returns NumPending.
func (dc *deviceConsumer) resetTo(ctx context.Context, seq uint64) (uint64, error) {
	dc.req(opResetTo)
	r, _, err := dc.reset(ctx, seq)
	if err != nil {
		return 0, err
	}
	return r.NumPending, nil
}

// gone reports whether err says the consumer no longer exists (reaped
// while idle, lost with a server).
func gone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || strings.Contains(err.Error(), "consumer not found")
}

// A device consumer is R1 on every stream, replicated or not (docs/
// operations.md, "Device cursors on a cluster"): on a NATS cluster it
// lives on one server, and while that server is down JetStream still has
// it (its meta layer answers "consumer is offline" to an info or a create,
// a pull finds no responder, a reset times out) but it serves nothing, and
// a create under its name fails. The device's cursor is not lost: the
// Postgres mirror holds it (an interval behind at most) and the session
// its ledger. So such a consumer is deleted (the meta layer does that
// without its server) and created again on a running server at the
// mirrored or the session's cursor: repeats, never a skip. When the
// server comes back JetStream has removed its copy.

// offline reports whether err is JetStream's "consumer is offline": the
// consumer exists, its server is not running.
func offline(err error) bool {
	if err == nil {
		return false
	}
	var apiErr *jetstream.APIError
	var jsErr jetstream.JetStreamError
	switch {
	case errors.As(err, &jsErr) && jsErr.APIError() != nil:
		apiErr = jsErr.APIError()
	case errors.As(err, &apiErr):
	default:
		return false
	}
	return apiErr.ErrorCode == jsErrConsumerOffline || apiErr.ErrorCode == jsErrConsumerOfflineReason
}

// JetStream's error codes of an offline consumer (nats-server errors.json:
// JSConsumerOfflineErr, JSConsumerOfflineReasonErrF).
const (
	jsErrConsumerOffline       jetstream.ErrorCode = 10119
	jsErrConsumerOfflineReason jetstream.ErrorCode = 10195
)

// consumerInfoTimeout bounds a login's consumer info request (open): far
// above an answer's milliseconds, well inside the client's hello timeout.
const consumerInfoTimeout = 4 * time.Second

// dropOffline deletes the consumer, which JetStream reported offline
// (cause), and returns ErrConsumerNotFound: the caller creates it again.
func (dc *deviceConsumer) dropOffline(ctx context.Context, cause error) error {
	dc.req(opDelete)
	err := dc.js.DeleteConsumer(ctx, dc.stream, dc.name)
	if err != nil && !gone(err) {
		return fmt.Errorf("device consumer %s is offline (%v); delete it to recreate it: %w", dc.name, cause, err)
	}
	dc.log.Warn("device consumer offline (its NATS server is down): deleted, to be created again on a running server at the confirmed cursor",
		zap.String("consumer", dc.name), zap.String("stream", dc.stream))
	return jetstream.ErrConsumerNotFound
}

// lost reports whether a failed call (err) means the consumer must be
// created again: it is gone, or offline (then it is deleted here). An
// unanswered call is checked with an info request, which the meta layer
// answers for an offline consumer; any other error is the caller's.
func (dc *deviceConsumer) lost(ctx context.Context, err error) bool {
	if gone(err) {
		return true
	}
	if !offline(err) {
		if !natsconn.Unanswered(err) || ctx.Err() != nil {
			return false
		}
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		dc.req(opLookup)
		_, err = dc.state(ictx)
		cancel()
		if err == nil || !offline(err) {
			return err != nil && gone(err)
		}
	}
	return gone(dc.dropOffline(ctx, err))
}

// recreate creates the consumer again after cursor (repeats, never skips).
func (dc *deviceConsumer) recreate(ctx context.Context, cursor uint64) error {
	cfg, err := streams.DeviceConsumerConfig(dc.p, dc.uid, dc.device, cursor+1, dc.opts.idleReap)
	if err != nil {
		return err
	}
	dc.req(opCreate)
	if _, err := dc.js.CreateOrUpdateConsumer(ctx, dc.stream, cfg); err != nil {
		return err
	}
	dc.recreated.Inc()
	return nil
}

// info reads the consumer's state from the server (consumerinfo.go).
func (dc *deviceConsumer) info(ctx context.Context) (consumerState, error) {
	dc.req(opInfo)
	return dc.state(ctx)
}

// fetch pulls up to n deliveries.
func (dc *deviceConsumer) fetch(ctx context.Context, n int) ([]pulled, error) {
	// NumPending said n are there: the pull returns as soon as it has them.
	dc.req(opFetch)
	return dc.pull(ctx, n, 2*time.Second)
}

// lastEntrySeq returns the stream sequence of the newest entry of the
// user's inbox (0: none): a direct get by subject, no pull request that
// could outlive the session.
func (dc *deviceConsumer) lastEntrySeq(ctx context.Context) (uint64, error) {
	dc.req(opDirectGet)
	m, err := dc.request(ctx, "$JS.API.DIRECT.GET."+dc.stream+"."+dc.subject, nil)
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

// tailState is what a session knows of its consumer's position and the
// deliveries it holds; the session's mutex guards it.
type tailState struct {
	at         uint64    // the consumer's next delivery (0: must be repositioned)
	ackedFloor uint64    // the consumer's ack floor as last set by us
	msgs       []tailMsg // deliveries not yet acknowledged
	left       uint64    // NumPending after the last fetch
	known      bool      // left is current
	verified   bool      // a fetch found the tail empty since known was last set from NumPending
	nextDseq   uint64    // the consumer sequence the next delivery must have (0: unknown)
}

type tailMsg struct {
	seq   uint64
	reply string // its $JS.ACK subject (pull.go)
}

// opened takes the position open found.
func (t *tailState) opened(o openedConsumer) {
	t.at, t.ackedFloor = o.at, o.cursor
	t.left, t.known, t.verified = o.pending, o.at == o.cursor+1, false
	t.nextDseq = o.nextDseq // a reset restarts delivery sequences
}

// stale: the stream may have grown (a live entry, a NATS reconnect); the
// tail has to be read to cover it.
func (t *tailState) stale() {
	t.known = false
	t.verified = false
}

// placed: the consumer was reset to deliver cursor+1 next.
func (t *tailState) placed(cursor, left uint64) {
	t.at, t.ackedFloor, t.nextDseq = cursor+1, cursor, 1
	t.left, t.known, t.verified = left, true, false
	t.msgs = nil
}

// skipped: coverage jumped (an ack_range); the consumer is moved there
// once the cursor stands at it.
func (t *tailState) skipped() {
	t.at = 0
	t.stale()
	t.msgs = nil
}

// orphaned: deliveries went to a pull request nobody read; the consumer
// must be put back at the cursor.
func (t *tailState) orphaned() {
	t.at, t.nextDseq = 0, 0
	t.stale()
}

// recreated: the consumer was created again after cursor.
func (t *tailState) recreated(cursor uint64) {
	t.at, t.ackedFloor, t.nextDseq = 0, cursor, 0
	t.stale()
	t.msgs = nil
}

// fetched takes what a fetch delivered, up to stream seq last.
func (t *tailState) fetched(delivered []tailMsg, last, left, nextDseq uint64) {
	t.msgs = append(t.msgs, delivered...)
	t.at, t.left, t.known, t.verified = last+1, left, true, false
	t.nextDseq = nextDseq
}

// ackUpTo finds the newest delivery at or below cursor and forgets it and
// those before it: acknowledging its reply subject (returned, "" when there
// is none) moves the consumer's ack floor there (AckPolicy all). The slice
// is released when it empties, and shifted down otherwise, so that a
// session that caught up holds none of the reply subjects it acked.
func (t *tailState) ackUpTo(cursor uint64) string {
	i, found := slices.BinarySearchFunc(t.msgs, cursor, func(m tailMsg, seq uint64) int {
		switch {
		case m.seq < seq:
			return -1
		case m.seq > seq:
			return 1
		}
		return 0
	})
	if !found {
		i--
	}
	if i < 0 {
		return ""
	}
	reply := t.msgs[i].reply
	t.ackedFloor = t.msgs[i].seq
	if i+1 == len(t.msgs) {
		t.msgs = nil
	} else {
		t.msgs = slices.Delete(t.msgs, 0, i+1)
	}
	return reply
}

// recover handles a consumer that vanished under the session (reaped while
// idle, lost with a server) or whose server is down (offline, see lost):
// it is recreated at the cursor, and the step is tried again (errRetry).
func (s *session) recover(ctx context.Context, err error) error {
	if !s.cons.lost(ctx, err) {
		return err
	}
	if s.epochGone(ctx) {
		return err // the session ends (epoch.go)
	}
	s.mu.Lock()
	cursor := s.led.Cursor()
	s.mu.Unlock()
	if cerr := s.cons.recreate(ctx, cursor); cerr != nil {
		return fmt.Errorf("recreate consumer after %v: %w", err, cerr)
	}
	s.mu.Lock()
	s.tail.recreated(cursor)
	s.mu.Unlock()
	return retry(fmt.Sprintf("consumer created again at cursor %d after: %v", cursor, err))
}

// syncConsumer, as a session ends, moves the consumer's ack floor up to
// the cursor where acks did not (entries served from the archive were
// never delivered by it).
//
// It is not done during an archive drain: a reset makes the server count
// the consumer's pending entries, in its read loop of the connection, and
// with the cursor inside the user's entries that count reads the stream
// block message by message (up to 8 MB, tens of thousands of entries;
// measured in a 10,000-device storm: a quarter of the process's CPU, with
// the drain's once-a-second moves half of the resets). Until the session
// ends the confirmed position is in the Postgres mirror (written once a
// second), which a login takes when it knows more than the consumer
// (deviceConsumer.open); the switch from the archive to the tail puts the
// consumer at the cursor anyway (positionTail).
func (s *session) syncConsumer(ctx context.Context) {
	s.mu.Lock()
	c := s.led.Cursor()
	due := c > s.tail.ackedFloor
	s.mu.Unlock()
	if !due {
		return
	}
	// The session has ended: nothing reads its tail state after this.
	if _, err := s.cons.resetTo(ctx, c+1); err != nil {
		s.g.log.Debug("move consumer to cursor", zap.String("consumer", s.consumer), zap.Error(err))
	}
}
