// Package push decides, in the syncer, which inbox entries reach their
// recipient as a push event for apps in the background, and publishes the
// events on push.<uid> in the PUSH stream, where the push bridge
// (cmd/pushbridge, internal/push/bridge) reads them.
//
// A message entry is decided --push-after its store time: when no device
// of the recipient confirmed it by then (no device connected, or one that
// did not confirm) and the user has not read it, it is pushed. Events are
// collapsed per user: at most one per --push-collapse window; what is
// decided inside the window is folded into one event at its end, which
// counts the messages it covers and carries the unread count of then.
// Every message entry ends in exactly one outcome, counted in
// inboxd_push_messages_total{outcome}: pushed (covered by one event), or
// a reason it needs none (docs/protocol.md, "Push events").
//
// Duplicates: each INBOX partition is read by one pinned consumer, and a
// user's inbox is in one partition, so one pusher decides a user at a
// time. An event is first recorded in Postgres (push_state: the seq it
// covers up to, its number, the event itself as pending) and then
// published with Nats-Msg-Id "<uid>:<n>": a redelivered entry at or below
// covered_seq is not pushed again, and an event recorded and not yet
// published when a syncer stopped is published again at start under the
// same id, which the stream's duplicate window drops if it got there.
package push

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/wire"
)

// Defaults of Options.
const (
	// DefaultAfter covers a connected device's confirmation (well below a
	// second) plus the gateways' one-second flush of cursors to Postgres,
	// with room for a slow phone on a bad network.
	DefaultAfter = 10 * time.Second
	// DefaultCollapse: a burst of messages becomes one notification, and
	// a busy user gets at most two a minute.
	DefaultCollapse = 30 * time.Second
	// MinAfter is the shortest --push-after: below the cursor flush a
	// device that confirmed at once would still be pushed.
	MinAfter = time.Second
	// staleAfter: an entry older than this when it is decided (a syncer
	// that was down, push turned on again) is not pushed. It is PUSH's
	// max_age: an event that old would be dropped from the stream anyway.
	staleAfter = 24 * time.Hour
	// kindDeleted is a tombstone's kind (store.KindDeletedBody).
	kindDeleted = wire.KindDeleted
)

// Outcomes of a message entry (the label of inboxd_push_messages_total).
const (
	OutcomePushed      = "pushed"      // covered by one event
	OutcomeConfirmed   = "confirmed"   // a device confirmed it in time
	OutcomeRead        = "read"        // the user read it (on any device) in time
	OutcomeOwn         = "own"         // the sender's own copy (its other devices)
	OutcomeEvent       = "event"       // not a message: read_sync, a receipt
	OutcomeTombstone   = "tombstone"   // its sender was deleted
	OutcomeGone        = "gone"        // retention removed it before the decision
	OutcomeStale       = "stale"       // older than a day when decided
	OutcomeCovered     = "covered"     // redelivered after an event covered it
	OutcomeUndecodable = "undecodable" // not an inbox entry (the archiver quarantines it)
)

// Options configures the pusher.
type Options struct {
	Layout streams.Layout
	// After: an entry is decided this long after it was stored.
	After time.Duration
	// Collapse: at most one event per user per this long.
	Collapse time.Duration
	// Body puts the newest message's text (at most MaxBody bytes) into
	// events. Off by default: the text would leave the installation.
	Body bool
	// BatchSize bounds the entries decided in one Postgres round trip
	// (default 500).
	BatchSize int
}

// DefaultOptions returns the defaults: after 10s, collapse 30s, no body.
func DefaultOptions() Options {
	return Options{Layout: streams.DefaultLayout, After: DefaultAfter, Collapse: DefaultCollapse, BatchSize: 500}
}

// Validate checks the durations.
func (o Options) Validate() error {
	if o.After < MinAfter {
		return fmt.Errorf("push: --push-after %s is below %s: devices' confirmations reach Postgres about a second late", o.After, MinAfter)
	}
	if o.Collapse < 0 {
		return fmt.Errorf("push: --push-collapse %s is negative (0: an event per decision)", o.Collapse)
	}
	return nil
}

// Pusher runs one decider per INBOX partition.
type Pusher struct {
	opts Options
	log  *zap.Logger
	js   jetstream.JetStream
	pool *pgxpool.Pool

	messages *prometheus.CounterVec
	events   prometheus.Counter
	errors   prometheus.Counter
	held     prometheus.Gauge
}

// New returns a pusher; opts must be valid.
func New(opts Options, log *zap.Logger, js jetstream.JetStream, pool *pgxpool.Pool, reg prometheus.Registerer) (*Pusher, error) {
	if opts.Layout == (streams.Layout{}) {
		opts.Layout = streams.DefaultLayout
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 500
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	f := promauto.With(reg)
	return &Pusher{opts: opts, log: log, js: js, pool: pool,
		messages: f.NewCounterVec(prometheus.CounterOpts{Name: "inboxd_push_messages_total",
			Help: "Inbox entries the pusher decided, by outcome: pushed (covered by one event) or why none was needed."}, []string{"outcome"}),
		events: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_push_events_total", Help: "Push events published to the PUSH stream."}),
		errors: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_push_errors_total",
			Help: "Failed Postgres decisions and PUSH publishes (retried)."}),
		held: f.NewGauge(prometheus.GaugeOpts{Name: "inboxd_push_held_entries",
			Help: "Message entries waiting for their decision or in a user's collapse window."}),
	}, nil
}

// Run decides until ctx ends. Events recorded and not published by a
// predecessor are published first.
func (p *Pusher) Run(ctx context.Context) error {
	if err := p.republish(ctx); err != nil {
		return err
	}
	// The consumer must not redeliver an entry the pusher still holds: it
	// holds one --push-after, then up to --push-collapse in a fold.
	hold, now := p.opts.After+p.opts.Collapse+time.Minute, time.Now()
	var wg sync.WaitGroup
	for part := 0; part < p.opts.Layout.InboxPartitions; part++ {
		start := now
		old, err := p.js.Consumer(ctx, streams.InboxStream(part), streams.PusherConsumer)
		switch {
		case err == nil && old.CachedInfo().Config.OptStartTime != nil:
			start = *old.CachedInfo().Config.OptStartTime
		case err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound):
			return fmt.Errorf("push: look up consumer on %s: %w", streams.InboxStream(part), err)
		}
		cfg, err := streams.PusherConsumerConfig(start, hold)
		if err != nil {
			return err
		}
		cons, err := p.js.CreateOrUpdateConsumer(ctx, streams.InboxStream(part), cfg)
		if err != nil {
			return fmt.Errorf("push: consumer on %s: %w", streams.InboxStream(part), err)
		}
		wg.Add(1)
		go func(part int) {
			defer wg.Done()
			p.runPartition(ctx, part, cons)
		}(part)
	}
	wg.Wait()
	return ctx.Err()
}

// republish publishes the events push_state holds as pending.
func (p *Pusher) republish(ctx context.Context) error {
	pend, err := pendingEvents(ctx, p.pool)
	if err != nil || len(pend) == 0 {
		return err
	}
	uids, ns, payloads := make([]int64, len(pend)), make([]int64, len(pend)), make([][]byte, len(pend))
	for i, e := range pend {
		uids[i], ns[i], payloads[i] = e.uid, e.n, e.payload
	}
	if err := p.sendAll(ctx, uids, ns, payloads); err != nil {
		return err
	}
	p.log.Info("published the push events a previous syncer recorded", zap.Int("events", len(pend)))
	return nil
}

// item is a message entry the pusher holds until it is decided.
type item struct {
	msg jetstream.Msg
	seq uint64
	uid int64
	at  time.Time // the entry's store time
	e   streams.Entry
}

// fold holds a user's entries decided for a push inside its collapse
// window, until due (the window's end).
type fold struct {
	items []*item
	due   time.Time
}

// partition is one partition's decider state (its goroutine's alone).
type partition struct {
	n     int
	log   *zap.Logger
	queue []*item          // delivered, not decided yet, in stream order
	held  map[uint64]*item // every item in queue or a fold, by seq
	folds map[int64]*fold  // by uid
	retry time.Time        // after a failure: no attempt before
	delay time.Duration    // the next failure's pause
}

func (p *Pusher) runPartition(ctx context.Context, n int, cons jetstream.Consumer) {
	pt := &partition{n: n, log: p.log.With(zap.Int("partition", n)), held: map[uint64]*item{}, folds: map[int64]*fold{}}
	in := make(chan jetstream.Msg, 2*p.opts.BatchSize)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case in <- m:
		case <-ctx.Done():
		}
	},
		jetstream.PullMaxMessages(p.opts.BatchSize),
		jetstream.PullExpiry(2*time.Second),
		jetstream.PullPriorityGroup(streams.PusherGroup),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { pt.log.Debug("consume", zap.Error(err)) }))
	if err != nil {
		pt.log.Error("push: consume INBOX partition", zap.Error(err))
		return
	}
	defer cc.Stop()
	defer func() { p.held.Sub(float64(len(pt.held))) }()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		wait := time.Hour
		if w, ok := pt.nextWake(p.opts.After); ok {
			wait = max(time.Until(w), 0)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case m := <-in:
			p.receive(pt, m)
		drain:
			for range p.opts.BatchSize {
				select {
				case m := <-in:
					p.receive(pt, m)
				default:
					break drain
				}
			}
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		now := time.Now()
		if now.Before(pt.retry) {
			continue
		}
		err := p.decideDue(ctx, pt, now)
		if err == nil {
			err = p.flushFolds(ctx, pt, now)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.errors.Inc()
			pt.delay = min(max(2*pt.delay, 100*time.Millisecond), 5*time.Second)
			pt.retry = time.Now().Add(pt.delay)
			pt.log.Warn("push: decision failed; retrying", zap.Duration("in", pt.delay), zap.Error(err))
			continue
		}
		pt.delay = 0
	}
}

// nextWake is when the next decision is due: the head entry's, a fold's,
// or a retry's.
func (pt *partition) nextWake(after time.Duration) (time.Time, bool) {
	var w time.Time
	if len(pt.queue) > 0 {
		w = pt.queue[0].at.Add(after)
	}
	for _, f := range pt.folds {
		if w.IsZero() || f.due.Before(w) {
			w = f.due
		}
	}
	if !w.IsZero() && w.Before(pt.retry) {
		w = pt.retry
	}
	return w, !w.IsZero()
}

// receive takes a delivery: what needs no decision is acknowledged at
// once, a message entry is held for its decision.
func (p *Pusher) receive(pt *partition, m jetstream.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return // not a JetStream delivery
	}
	seq := md.Sequence.Stream
	if it, ok := pt.held[seq]; ok {
		it.msg = m // a redelivery of what is held: ack the newest delivery
		return
	}
	outcome := ""
	_, uid, err := streams.SubjectUID(m.Subject())
	var e streams.Entry
	if err == nil {
		e, err = streams.DecodeEntry(m.Data())
	}
	switch {
	case err != nil:
		outcome = OutcomeUndecodable
	case e.IsEvent():
		outcome = OutcomeEvent
	case e.SenderUID == uid:
		outcome = OutcomeOwn
	case e.Kind == wire.KindDeleted:
		outcome = OutcomeTombstone
	}
	if outcome != "" {
		p.done(m, outcome)
		return
	}
	it := &item{msg: m, seq: seq, uid: uid, at: md.Timestamp, e: e}
	pt.queue = append(pt.queue, it)
	pt.held[seq] = it
	p.held.Inc()
}

// done acknowledges an entry that ended with outcome.
func (p *Pusher) done(m jetstream.Msg, outcome string) {
	_ = m.Ack()
	p.messages.WithLabelValues(outcome).Inc()
}

func (p *Pusher) release(pt *partition, it *item, outcome string) {
	delete(pt.held, it.seq)
	p.held.Dec()
	p.done(it.msg, outcome)
}

// decideDue decides the queued entries whose time has come, a batch at a
// time.
func (p *Pusher) decideDue(ctx context.Context, pt *partition, now time.Time) error {
	for len(pt.queue) > 0 && !pt.queue[0].at.Add(p.opts.After).After(now) {
		k := 0
		for k < len(pt.queue) && k < p.opts.BatchSize && !pt.queue[k].at.Add(p.opts.After).After(now) {
			k++
		}
		batch := pt.queue[:k]
		var live []*item
		for _, it := range batch {
			if now.Sub(it.at) > staleAfter {
				p.release(pt, it, OutcomeStale)
				continue
			}
			live = append(live, it)
		}
		if len(live) == 0 {
			pt.queue = pt.queue[k:]
			continue
		}
		vs, err := verdicts(ctx, p.pool, live)
		if err != nil {
			// Not decided: the stale ones are gone from held, the rest
			// stay queued for the retry.
			pt.queue = append(live, pt.queue[k:]...)
			return err
		}
		pt.queue = pt.queue[k:]
		if err := p.apply(ctx, pt, live, vs, now); err != nil {
			return err
		}
	}
	return nil
}

// apply acts on the verdicts of items: each ends with a reason, or is
// pushed now (the user's window is closed), or folded (it is open). The
// events pushed now are recorded and published as one batch; if they
// could not be recorded, their items wait in folds due at once, so that
// the retry publishes them.
func (p *Pusher) apply(ctx context.Context, pt *partition, items []*item, vs []verdict, now time.Time) error {
	byUser := map[int64][]*item{}
	var order []int64
	last := map[int64]time.Time{}
	for i, it := range items {
		if o := vs[i].reason(); o != "" {
			p.release(pt, it, o)
			continue
		}
		if _, ok := byUser[it.uid]; !ok {
			order = append(order, it.uid)
		}
		byUser[it.uid] = append(byUser[it.uid], it)
		last[it.uid] = vs[i].lastPushAt
	}
	var groups []group
	for _, uid := range order {
		if f, ok := pt.folds[uid]; ok {
			f.items = append(f.items, byUser[uid]...)
			continue
		}
		if due := last[uid].Add(p.opts.Collapse); !last[uid].IsZero() && now.Before(due) {
			pt.folds[uid] = &fold{items: byUser[uid], due: due}
			continue
		}
		groups = append(groups, group{uid, byUser[uid]})
	}
	if err := p.publish(ctx, pt, groups, now); err != nil {
		for _, g := range groups {
			pt.folds[g.uid] = &fold{items: g.items, due: now}
		}
		return err
	}
	return nil
}

// reason is why the entry needs no push ("" when it does).
func (v verdict) reason() string {
	switch {
	case v.covered:
		return OutcomeCovered
	case v.gone:
		return OutcomeGone
	case v.tombstone:
		return OutcomeTombstone
	case v.confirmed:
		return OutcomeConfirmed
	case v.read:
		return OutcomeRead
	}
	return ""
}

// flushFolds publishes the folds whose window closed: their entries are
// decided again (a device may have confirmed them, or the user read them,
// meanwhile), and what is left makes one event per user, published as
// one batch.
func (p *Pusher) flushFolds(ctx context.Context, pt *partition, now time.Time) error {
	var due []*item
	var uids []int64
	for uid, f := range pt.folds {
		if !f.due.After(now) {
			uids = append(uids, uid)
			due = append(due, f.items...)
		}
	}
	if len(uids) == 0 {
		return nil
	}
	slices.Sort(uids)
	vs, err := verdicts(ctx, p.pool, due)
	if err != nil {
		return err
	}
	reasons := make(map[*item]string, len(due))
	for i, it := range due {
		reasons[it] = vs[i].reason()
	}
	var groups []group
	for _, uid := range uids {
		f := pt.folds[uid]
		var left []*item
		for _, it := range f.items {
			if o := reasons[it]; o != "" {
				p.release(pt, it, o)
				continue
			}
			left = append(left, it)
		}
		f.items = left
		if len(left) == 0 {
			delete(pt.folds, uid)
			continue
		}
		groups = append(groups, group{uid, left})
	}
	if err := p.publish(ctx, pt, groups, now); err != nil {
		return err // the folds stay, due: the retry publishes them
	}
	for _, g := range groups {
		delete(pt.folds, g.uid)
	}
	return nil
}

// group is one user's items, covered by one event.
type group struct {
	uid   int64
	items []*item // in stream order
}

// publish records one event per group (one transaction), publishes them
// and acknowledges their items. Once recorded, the events are published
// whatever happens (now, or by the next syncer's start) and their items
// are covered.
func (p *Pusher) publish(ctx context.Context, pt *partition, groups []group, now time.Time) error {
	if len(groups) == 0 {
		return nil
	}
	evs, upTo := make([]*Event, len(groups)), make([]uint64, len(groups))
	for i, g := range groups {
		newest := g.items[len(g.items)-1]
		convs := map[int64]bool{}
		for _, it := range g.items {
			convs[it.e.ConvID] = true
		}
		ev := &Event{UID: g.uid, CollapseKey: CollapseKey(g.uid), ConvID: newest.e.ConvID, SenderUID: newest.e.SenderUID,
			MsgID: newest.e.MsgID, ConvSeq: newest.e.ConvSeq, SentAtMs: newest.e.CreatedAtMs,
			Messages: len(g.items), Conversations: len(convs), CreatedAtMs: now.UnixMilli()}
		if ev.SentAtMs == 0 {
			ev.SentAtMs = ids.Time(ev.MsgID).UnixMilli()
		}
		evs[i], upTo[i] = ev, newest.seq
	}
	payloads, err := decideEvents(ctx, p.pool, evs, upTo, now, p.opts.Body)
	if err != nil {
		return err
	}
	uids, ns := make([]int64, len(evs)), make([]int64, len(evs))
	for i, ev := range evs {
		uids[i], ns[i] = ev.UID, ev.N
	}
	if err := p.sendAll(ctx, uids, ns, payloads); err != nil {
		return err
	}
	for i, g := range groups {
		for _, it := range g.items {
			p.release(pt, it, OutcomePushed)
		}
		pt.log.Debug("push event", zap.Int64("uid", g.uid), zap.String("id", evs[i].ID), zap.Int("messages", evs[i].Messages), zap.Int64("unread", evs[i].Unread))
	}
	p.events.Add(float64(len(evs)))
	return nil
}

// sendAll publishes the events (uid, n) with their payloads, pipelined,
// retrying each until JetStream stores it (or ctx ends), and then clears
// them from pending.
func (p *Pusher) sendAll(ctx context.Context, uids, ns []int64, payloads [][]byte) error {
	msg := func(i int) *nats.Msg {
		return &nats.Msg{Subject: streams.PushSubject(uids[i]), Data: payloads[i],
			Header: nats.Header{jetstream.MsgIDHeader: {EventID(uids[i], ns[i])}}}
	}
	futures := make([]jetstream.PubAckFuture, len(uids))
	for i := range uids {
		futures[i], _ = p.js.PublishMsgAsync(msg(i)) // a failure is retried below
	}
	for i, f := range futures {
		if f != nil {
			select {
			case <-f.Ok():
				continue
			case <-f.Err():
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := p.send(ctx, msg(i)); err != nil {
			return err
		}
	}
	// Retried too: an event left pending would be published again at the
	// next start, which the duplicate window (2 min) may no longer catch.
	return p.retry(ctx, "mark push events published", func() error { return published(ctx, p.pool, uids, ns) })
}

// send publishes one event, retrying until JetStream stores it.
func (p *Pusher) send(ctx context.Context, m *nats.Msg) error {
	return p.retry(ctx, "publish push event "+m.Header.Get(jetstream.MsgIDHeader), func() error {
		_, err := p.js.PublishMsg(ctx, m)
		return err
	})
}

// retry calls fn until it succeeds or ctx ends, backing off to 5s.
func (p *Pusher) retry(ctx context.Context, what string, fn func() error) error {
	delay := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		p.errors.Inc()
		p.log.Warn("push: "+what+" failed; retrying", zap.Duration("in", delay), zap.Error(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}
