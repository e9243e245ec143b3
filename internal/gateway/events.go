package gateway

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/gateway/ledger"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// Per-user events (read_sync, receipts) are inbox entries like messages:
// they take the same ordered path and cursor, so an offline device catches
// up on them in order, and the archive keeps them.
//
// Publishing them is durable-effort. A publish that fails (NATS away, a
// JetStream timeout) is retried in the background with backoff for up to
// retryPolicy.budget, which stays inside the inbox streams' 2-minute
// duplicate window: a retry of a publish that did reach the stream (its
// ack was lost) is deduplicated by the event's Nats-Msg-Id. Failed
// attempts and events given up are counted
// (inboxd_gateway_event_publish_failures_total,
// inboxd_gateway_events_given_up_total) and an event given up is logged at
// warn. An event given up is not lost for good, because what it says is
// held elsewhere and a later event supersedes it (positions only grow):
// read_sync and the READ receipt are published again, for the read_seq in
// Postgres, on the next read of the conversation by any device of the
// user; a DELIVERED receipt by the device's next confirmation in the
// conversation; and the login summary carries read_seq (of conversations
// with anything unread).

// eventWriter publishes per-user events. It holds what it uses: the
// JetStream and core NATS connections, the partition count, its counters.
type eventWriter struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	parts  int
	log    *zap.Logger
	m      *metrics
	kinds  *convKinds
	policy retryPolicy
	slots  chan struct{} // one per event (or confirmation) awaiting a retry
	warns  *logLimiter

	ctx context.Context // the gateway's (set by Start): retries end with it
	wg  sync.WaitGroup
}

// retryPolicy is how a failed event publish is retried.
type retryPolicy struct {
	attempt time.Duration // bound of one attempt
	first   time.Duration // first backoff; doubled up to max, jittered
	max     time.Duration
	budget  time.Duration // no attempt starts later than this after the first
}

var defaultRetry = retryPolicy{attempt: 5 * time.Second, first: 250 * time.Millisecond, max: 5 * time.Second, budget: 90 * time.Second}

// maxRetrying bounds the events awaiting a retry at once; beyond it (a long
// outage under load) new failures are given up at once, counted.
const maxRetrying = 10000

func newEventWriter(js jetstream.JetStream, nc *nats.Conn, parts int, kinds *convKinds, log *zap.Logger, m *metrics) *eventWriter {
	return &eventWriter{js: js, nc: nc, parts: parts, kinds: kinds, log: log, m: m, policy: defaultRetry,
		slots: make(chan struct{}, maxRetrying), warns: newLogLimiter(5), ctx: context.Background()}
}

// start ties the retries to the gateway's lifetime.
func (w *eventWriter) start(ctx context.Context) { w.ctx = ctx }

// wait waits for the retries to end (after the gateway's context ended).
func (w *eventWriter) wait() { w.wg.Wait() }

// event is one event on its way into an inbox.
type event struct {
	uid      int64 // whose inbox
	entry    streams.Entry
	dedupeID string
}

func (e *event) fields() []zap.Field {
	return []zap.Field{zap.Int64("uid", e.uid), zap.String("event", e.entry.EventType.String()),
		zap.Int64("conv_id", e.entry.ConvID), zap.Int64("up_to_conv_seq", e.entry.ConvSeq), zap.String("dedupe_id", e.dedupeID)}
}

// publish writes e into its inbox (deduplicated by its id within the
// stream's window), then announces it on the user's live subject: one
// attempt.
func (w *eventWriter) publish(ctx context.Context, e *event) error {
	p := ids.Partition(e.uid, w.parts)
	e.entry.CreatedAtMs = time.Now().UnixMilli()
	body, err := e.entry.Marshal()
	if err != nil {
		return err
	}
	ack, err := w.js.PublishMsg(ctx, e.entry.Msg(p, e.uid, body, e.dedupeID))
	if err != nil {
		return err
	}
	// Announced even when the stream reports a duplicate: the attempt that
	// stored it may have failed before announcing. A session skips an
	// entry it already sent or covered.
	m := e.entry.Wire(ack.Sequence)
	_ = w.nc.Publish(streams.UserLive(p, e.uid), wire.AppendMessage(nil, &m))
	w.m.events.WithLabelValues(e.entry.EventType.String()).Inc()
	return nil
}

// publishOrRetry makes one attempt within ctx and, when it fails, leaves
// the event to the background retries. It reports the first attempt's
// error.
func (w *eventWriter) publishOrRetry(ctx context.Context, e *event) error {
	actx, cancel := context.WithTimeout(ctx, w.policy.attempt)
	err := w.publish(actx, e)
	cancel()
	if err != nil {
		w.m.eventFailures.WithLabelValues(e.entry.EventType.String()).Inc()
		w.later(e)
	}
	return err
}

// later publishes e in the background, with retries.
func (w *eventWriter) later(e *event) {
	w.background(e.entry.EventType, e.fields(), func() error { return w.publishRetried(e) })
}

// publishRetried publishes e with retries (see retried).
func (w *eventWriter) publishRetried(e *event) error {
	return w.retried(e.entry.EventType, func(ctx context.Context) error { return w.publish(ctx, e) })
}

// background runs fn on a goroutine of its own, holding one of the
// bounded retry slots; an error it returns is the event given up.
func (w *eventWriter) background(t pb.EventType, fields []zap.Field, fn func() error) {
	select {
	case w.slots <- struct{}{}:
	default:
		w.giveUp(t, errTooManyRetries, fields)
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() { <-w.slots }()
		if err := fn(); err != nil {
			w.giveUp(t, err, fields)
		}
	}()
}

type retryError string

func (e retryError) Error() string { return string(e) }

const errTooManyRetries = retryError("too many events awaiting a retry")

// retried calls fn until it succeeds, the budget is spent or the gateway
// stops, backing off between attempts; every failed attempt is counted.
func (w *eventWriter) retried(t pb.EventType, fn func(ctx context.Context) error) error {
	p := w.policy
	deadline := time.Now().Add(p.budget)
	delay := p.first
	for {
		ctx, cancel := context.WithTimeout(w.ctx, p.attempt)
		err := fn(ctx)
		cancel()
		if err == nil {
			return nil
		}
		w.m.eventFailures.WithLabelValues(t.String()).Inc()
		wait := delay/2 + rand.N(delay/2+1) // jitter: an outage's failures do not retry in lockstep
		if w.ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return err
		}
		tm := time.NewTimer(wait)
		select {
		case <-w.ctx.Done():
			tm.Stop()
			return err
		case <-tm.C:
		}
		delay = min(2*delay, p.max)
	}
}

func (w *eventWriter) giveUp(t pb.EventType, err error, fields []zap.Field) {
	w.m.eventsGivenUp.WithLabelValues(t.String()).Inc()
	if ok, suppressed := w.warns.allow(); ok {
		w.log.Warn("event not published; given up (a later read or confirmation of the conversation supersedes it)",
			append(fields, zap.Error(err), zap.Int64("suppressed", suppressed))...)
	}
}

// convKinds caches conversation kinds (they never change).
type convKinds struct {
	lookup func(ctx context.Context, convs []int64) (map[int64]int, error)
	m      sync.Map // int64 → int
}

// direct reports which of convs are direct conversations.
func (k *convKinds) direct(ctx context.Context, convs []int64) (map[int64]bool, error) {
	out := map[int64]bool{}
	var missing []int64
	for _, c := range convs {
		if v, ok := k.m.Load(c); ok {
			out[c] = v.(int) == store.KindDirect
		} else {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		got, err := k.lookup(ctx, missing)
		if err != nil {
			return nil, err
		}
		for c, kind := range got {
			k.m.Store(c, kind)
			out[c] = kind == store.KindDirect
		}
	}
	return out, nil
}

// delivered tells the senders of direct-conversation messages that
// uid's device stored them: one DELIVERED event per conversation and
// confirmation of each device, with the highest conv_seq confirmed. The
// dedupe id names the device, so that a second device confirming the same
// messages sends its own receipt (the event names the peer user only:
// pb.Event has no device field).
func (w *eventWriter) delivered(uid int64, device string, msgs []ledger.Info) {
	if len(msgs) == 0 {
		return // an ack of events only, or one that confirmed nothing: no map
	}
	top := map[int64]ledger.Info{}
	for _, m := range msgs {
		if m.Sender == uid {
			continue
		}
		if t, ok := top[m.Conv]; !ok || m.ConvSeq > t.ConvSeq {
			top[m.Conv] = m
		}
	}
	if len(top) == 0 {
		return
	}
	convs := make([]int64, 0, len(top))
	for c := range top {
		convs = append(convs, c)
	}
	fields := []zap.Field{zap.Int64("peer_uid", uid), zap.String("peer_device", device), zap.Int64s("conv_ids", convs)}
	w.background(pb.EventType_DELIVERED, fields, func() error {
		var direct map[int64]bool
		err := w.retried(pb.EventType_DELIVERED, func(ctx context.Context) (err error) {
			direct, err = w.kinds.direct(ctx, convs)
			return err
		})
		if err != nil {
			return err
		}
		for c, m := range top {
			if !direct[c] {
				continue
			}
			e := &event{uid: m.Sender, dedupeID: deliveredDedupeID(c, uid, device, m.ConvSeq),
				entry: streams.Entry{ConvID: c, ConvSeq: m.ConvSeq, EventType: pb.EventType_DELIVERED, EventPeer: uid}}
			if err := w.publishRetried(e); err != nil {
				w.giveUp(pb.EventType_DELIVERED, err, e.fields())
			}
		}
		return nil
	})
}

// deliveredDedupeID is the Nats-Msg-Id of the DELIVERED receipt of uid's
// device for conv up to convSeq: dlv:<conv>:<uid>:<device>:<conv_seq>.
func deliveredDedupeID(conv, uid int64, device string, convSeq int64) string {
	return "dlv:" + strconv.FormatInt(conv, 10) + ":" + strconv.FormatInt(uid, 10) + ":" + device + ":" + strconv.FormatInt(convSeq, 10)
}
