// Package fanout turns accepted sends into stored messages: it reads the SEND
// stream (one active processor per partition), assigns msg_id and conv_seq,
// stores each body once in Postgres, writes one inbox entry per member to the
// INBOX partitions, and only then acknowledges the send and answers STORED.
package fanout

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/lease"
	"github.com/inboxd/inboxd/internal/natsconn"
	"github.com/inboxd/inboxd/internal/ops"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// Options configures a fanout. Zero values take the documented defaults.
type Options struct {
	Layout streams.Layout
	// NodeID is this fanout's snowflake node (0..1023), or AutoNodeID.
	// With Leases it is leased (nodeid.go): AutoNodeID takes the lowest
	// free one, and a fixed one that another running fanout holds refuses
	// the start. Without Leases it is used as is (AutoNodeID: 0), and
	// fanouts running at the same time must be given different ones.
	NodeID int
	// Leases is the leases bucket (lease.Bucket) the node id is leased
	// in; nil: no lease (a single fanout, the package's tests).
	Leases jetstream.KeyValue
	// Holder names this fanout in its lease (default host:pid).
	Holder string
	// LeaseTiming is the node id lease's timing (default lease.DefaultTiming).
	LeaseTiming lease.Timing
	// Partitions are the SEND partitions this instance pulls; nil means all.
	// Several instances may pull the same partition: the pinned priority
	// group lets one of them process it at a time (two for a moment while
	// the pin moves, which the batches' order keeping allows, batch.go).
	Partitions []int
	// BatchSize is the most sends processed in one Postgres transaction and
	// one round of inbox publishes (default 256, at most the consumer's
	// max_batch).
	BatchSize int
	// FetchWait is the expiry of one pull request (default 2s). It must stay
	// below the consumer's priority_timeout (PinnedTTL) or the pin flaps.
	FetchWait time.Duration
	// PublishTimeout bounds the wait for inbox publish acks (default 10s).
	PublishTimeout time.Duration
	// MemberCacheSize bounds the member lists cached per partition (default 10000).
	MemberCacheSize int
	// NoLive turns off the live announcements (only to measure their cost).
	NoLive bool
}

// DefaultOptions returns the default of every option that has one: the one
// place they are written (setDefaults, internal/config and the flags' help
// take them from here). Partitions nil means all of the layout's.
func DefaultOptions() Options {
	return Options{
		Layout:          streams.DefaultLayout,
		BatchSize:       256,
		FetchWait:       2 * time.Second,
		PublishTimeout:  10 * time.Second,
		MemberCacheSize: 10000,
		Holder:          defaultHolder(),
		LeaseTiming:     lease.DefaultTiming,
	}
}

// defaultHolder names a fanout in its lease: host:pid.
func defaultHolder() string {
	host, _ := os.Hostname()
	return host + ":" + strconv.Itoa(os.Getpid())
}

// setDefaults gives every zero (or negative) option its default.
func (o *Options) setDefaults() {
	d := DefaultOptions()
	if o.Layout == (streams.Layout{}) {
		o.Layout = d.Layout
	}
	if o.BatchSize <= 0 {
		o.BatchSize = d.BatchSize
	}
	if o.FetchWait <= 0 {
		o.FetchWait = d.FetchWait
	}
	if o.PublishTimeout <= 0 {
		o.PublishTimeout = d.PublishTimeout
	}
	if o.MemberCacheSize <= 0 {
		o.MemberCacheSize = d.MemberCacheSize
	}
	if o.LeaseTiming == (lease.Timing{}) {
		o.LeaseTiming = d.LeaseTiming
	}
	if o.Holder == "" {
		o.Holder = d.Holder
	}
	if o.Partitions == nil {
		for p := 0; p < o.Layout.SendPartitions; p++ {
			o.Partitions = append(o.Partitions, p)
		}
	}
}

// Fanout processes SEND partitions.
type Fanout struct {
	opts    Options
	log     *zap.Logger
	nc      *nats.Conn
	js      jetstream.JetStream
	acks    *ackMux // the inbox publishes' acknowledgements
	fence   *inboxFence
	st      *store.Store
	ids     *idSource
	held    *lease.Lease // the node id lease (with Options.Leases)
	metrics *metrics
	ensured bool // the consumers were created (CreateConsumers before Run)

	// afterCommit, when set (tests only), runs after the content commit and
	// before the inbox publishes; an error abandons the batch there, as a
	// crash would.
	afterCommit func() error
}

// New returns a fanout. nc must stay connected for the fanout's lifetime.
func New(opts Options, log *zap.Logger, nc *nats.Conn, st *store.Store, reg prometheus.Registerer) (*Fanout, error) {
	opts.setDefaults()
	if err := opts.Layout.Validate(); err != nil {
		return nil, err
	}
	if opts.NodeID != AutoNodeID && (opts.NodeID < 0 || opts.NodeID > ids.MaxNode) {
		return nil, fmt.Errorf("fanout: node id %d: %w", opts.NodeID, ids.ErrBadNode)
	}
	if err := opts.LeaseTiming.Validate(); err != nil {
		return nil, err
	}
	// The inbox entries are published through acks (pubacks.go), not the
	// jetstream package's async publish: js is for the consumers.
	js, err := jetstream.New(nc, jetstream.WithClientTrace(ops.JetStreamTrace(reg)))
	if err != nil {
		return nil, err
	}
	acks, err := newAckMux(nc)
	if err != nil {
		return nil, err
	}
	f := &Fanout{opts: opts, log: log, nc: nc, js: js, acks: acks, st: st, metrics: newMetrics(reg),
		fence: newInboxFence(nc, js, st, opts.Layout.InboxPartitions)}
	f.ids = newIDSource(f, reg)
	return f, nil
}

// publishWindow is the most inbox publishes in flight per process.
const publishWindow = 16384

// CreateConsumers creates or updates the fanout consumers before Run (Run
// does it otherwise), so that a start that cannot fails there.
func (f *Fanout) CreateConsumers(ctx context.Context) error {
	if f.ensured {
		return nil
	}
	kept, err := streams.EnsureFanoutConsumers(ctx, f.js, f.opts.Layout)
	if err != nil {
		return err
	}
	if len(kept) > 0 {
		f.log.Warn("fanout consumers of an older installation keep their file storage: they cost CPU while they move; "+
			"docs/operations.md, 'Upgrading: the consumers storage', moves them to memory", zap.Strings("consumers", kept))
	}
	f.ensured = true
	return nil
}

// Run creates the fanout consumers if needed and processes the partitions
// until ctx is done. Streams must exist (streams.EnsureStreams).
func (f *Fanout) Run(ctx context.Context) error {
	// A NATS that does not answer yet (a cluster electing a meta leader,
	// a node catching up) is waited out: the fanout stopping here would
	// stop it for the process's lifetime.
	for delay := 250 * time.Millisecond; ; delay = min(2*delay, 4*time.Second) {
		err := f.CreateConsumers(ctx)
		if err == nil {
			break
		}
		if !natsconn.Unanswered(err) || ctx.Err() != nil {
			return err
		}
		f.log.Warn("create the fanout consumers; retrying", zap.Error(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
	}
	if err := f.TakeNodeID(ctx); err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.keepNodeID(ctx)
	}()
	for _, p := range f.opts.Partitions {
		cons, err := f.takeOver(ctx, p)
		if err != nil {
			return err
		}
		pt := &partition{f: f, p: p, cons: cons, members: newMemberCache(f.opts.MemberCacheSize)}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pt.run(ctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.watchLag(ctx, lagEvery)
	}()
	wg.Wait()
	return ctx.Err()
}

// takeOver returns SEND partition p's consumer, ready for this fanout to
// pull from: sends delivered to a predecessor that died come back at once,
// and a predecessor's pin is released.
func (f *Fanout) takeOver(ctx context.Context, p int) (jetstream.Consumer, error) {
	cons, err := f.js.Consumer(ctx, streams.SendStream, streams.FanoutConsumer(p))
	if err != nil {
		return nil, fmt.Errorf("fanout: consumer %s: %w", streams.FanoutConsumer(p), err)
	}
	// A fanout that starts has nothing in flight: sends delivered to a
	// predecessor that died come back now instead of after ack_wait.
	// Should another fanout be alive and busy with them, it meets them
	// again later and answers from Postgres (every step is idempotent).
	// (Only when there are such sends: a reset re-arms the pin.)
	if cons.CachedInfo().NumAckPending > 0 {
		if _, err := f.js.ResetConsumer(ctx, streams.SendStream, streams.FanoutConsumer(p)); err != nil {
			f.log.Warn("reset fanout consumer", zap.Int("partition", p), zap.Error(err))
		}
	}
	// The pin of a predecessor that died lasts PinnedTTL; a fanout
	// that starts takes the partition over at once. (Should the pinned
	// one be alive, both serve the partition until the pin settles:
	// conv_seq is assigned under a row lock, and a batch publishes the
	// messages of its conversations that the other committed and has not
	// published before its own (batch.go), so inbox entries keep conv_seq
	// order.)
	for _, pg := range cons.CachedInfo().PriorityGroups {
		if pg.PinnedClientID == "" {
			continue
		}
		if st, err := f.js.Stream(ctx, streams.SendStream); err != nil {
			f.log.Warn("unpin fanout consumer", zap.Int("partition", p), zap.Error(err))
		} else if err := st.UnpinConsumer(ctx, streams.FanoutConsumer(p), pg.Group); err != nil {
			f.log.Warn("unpin fanout consumer", zap.Int("partition", p), zap.Error(err))
		}
	}
	return cons, nil
}

// recreate creates SEND partition p's consumer again after it was lost,
// trying until it succeeds or ctx ends. The consumers keep their state in
// memory (jetstream/consumers/SEND_fanout.json): a NATS server restarted
// alone, or a whole cluster, comes back without them. Nothing is lost
// with one: SEND is a work queue, so every send not acknowledged is still
// in the stream and the new consumer delivers it from the first.
func (f *Fanout) recreate(ctx context.Context, p int) (jetstream.Consumer, error) {
	b := newBackoff(250*time.Millisecond, 4*time.Second)
	for {
		_, err := streams.EnsureFanoutConsumer(ctx, f.js, p)
		if err == nil {
			var cons jetstream.Consumer
			if cons, err = f.takeOver(ctx, p); err == nil {
				f.metrics.consumersRecreated.Inc()
				return cons, nil
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		f.log.Warn("create the lost fanout consumer again; retrying", zap.Int("partition", p), zap.Error(err))
		b.sleep(ctx)
	}
}

// partition is the single writer of one SEND partition (while pinned).
type partition struct {
	f       *Fanout
	p       int
	cons    jetstream.Consumer
	members *memberCache
	// salt is added to the dedupe ids of this partition's entries after a
	// clustered stream refused one as "in process" (see process).
	salt uint64
}

func (pt *partition) run(ctx context.Context) {
	log := pt.f.log.With(zap.Int("partition", pt.p))
	in := make(chan jetstream.Msg, 2*pt.f.opts.BatchSize)
	for {
		lost := pt.serve(ctx, log, in)
		if !lost || ctx.Err() != nil {
			return
		}
		// What the lost consumer delivered and this fanout did not take
		// yet is still in the work queue: the new consumer delivers it
		// again (an ack to the old one would be for nothing).
	drop:
		for {
			select {
			case <-in:
			default:
				break drop
			}
		}
		cons, err := pt.f.recreate(ctx, pt.p)
		if err != nil {
			return
		}
		log.Warn("the fanout consumer was lost and is created again")
		pt.cons = cons
	}
}

// serve consumes pt.cons and processes its batches until ctx ends
// (false) or the consumer is lost (true: deleted, not found, or its
// heartbeats stopped).
func (pt *partition) serve(ctx context.Context, log *zap.Logger, in chan jetstream.Msg) (lost bool) {
	// Consume keeps pull requests outstanding (refreshed every FetchWait,
	// below the consumer's PinnedTTL so the pin holds) and hands messages
	// over as they arrive; batches form from whatever is waiting, so a lone
	// send is not held back to fill a batch.
	gone := make(chan struct{}, 1)
	cc, err := pt.cons.Consume(func(m jetstream.Msg) {
		select {
		case in <- m:
		case <-ctx.Done():
		}
	},
		jetstream.PullMaxMessages(pt.f.opts.BatchSize),
		jetstream.PullExpiry(pt.f.opts.FetchWait),
		jetstream.PullPriorityGroup(streams.FanoutGroup),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			log.Debug("consume", zap.Error(err))
			if streams.ConsumerLost(err) {
				select {
				case gone <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		log.Error("consume SEND partition", zap.Error(err))
		return true
	}
	defer cc.Stop()

	backoff := newBackoff(50*time.Millisecond, 5*time.Second)
	msgs := make([]jetstream.Msg, 0, pt.f.opts.BatchSize)
	for {
		msgs = msgs[:0]
		select {
		case <-ctx.Done():
			return false
		case <-gone:
			return true
		case m := <-in:
			msgs = append(msgs, m)
		}
	fill:
		for len(msgs) < pt.f.opts.BatchSize {
			select {
			case m := <-in:
				msgs = append(msgs, m)
			default:
				break fill
			}
		}
		// A batch is retried until it succeeds: moving on would let later
		// sends of a conversation overtake earlier ones.
		for {
			err := pt.process(ctx, msgs)
			if err == nil {
				backoff.reset()
				break
			}
			pt.f.metrics.batchErrors.Inc()
			if ctx.Err() != nil {
				return false
			}
			log.Warn("batch failed; retrying", zap.Int("sends", len(msgs)), zap.Error(err))
			backoff.sleep(ctx)
		}
	}
}

// backoff is a capped exponential backoff.
type backoff struct{ min, max, cur time.Duration }

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max, cur: min} }
func (b *backoff) reset()                        { b.cur = b.min }
func (b *backoff) sleep(ctx context.Context) {
	t := time.NewTimer(b.cur)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	b.cur = min(b.cur*2, b.max)
}

// sortedUnique returns the distinct values of s in ascending order.
func sortedUnique(s []int64) []int64 {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}
