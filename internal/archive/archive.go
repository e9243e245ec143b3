// Package archive copies every inbox entry from the INBOX partitions into
// Postgres inbox_archive, seconds behind the streams. The archive outlives
// the streams' hot window, and it serves catch-up of older ranges by the
// (uid, seq) index, so that a device's catch-up costs its own backlog
// instead of a scan of everyone's traffic in its partition.
package archive

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// Options configures the archiver.
type Options struct {
	Layout streams.Layout
	// BatchSize bounds the entries written in one transaction (default 5000).
	BatchSize int
	// FetchWait is the expiry of one pull request (default 2s, below the
	// consumer's PinnedTTL).
	FetchWait time.Duration
}

// Archiver runs one writer per INBOX partition (pinned: among several
// syncers one archives a partition at a time).
type Archiver struct {
	opts Options
	log  *zap.Logger
	js   jetstream.JetStream
	st   *store.Store

	entries prometheus.Counter
	lag     *prometheus.GaugeVec
	errors  prometheus.Counter
	gaps    prometheus.Counter
}

// New returns an archiver.
func New(opts Options, log *zap.Logger, js jetstream.JetStream, st *store.Store, reg prometheus.Registerer) *Archiver {
	if opts.Layout == (streams.Layout{}) {
		opts.Layout = streams.DefaultLayout
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 5000
	}
	if opts.FetchWait <= 0 {
		opts.FetchWait = 2 * time.Second
	}
	f := promauto.With(reg)
	return &Archiver{
		opts: opts, log: log, js: js, st: st,
		entries: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_entries_total", Help: "Inbox entries copied to inbox_archive."}),
		lag: f.NewGaugeVec(prometheus.GaugeOpts{Name: "inboxd_archive_pending_entries",
			Help: "Entries of a partition not yet archived (as of the last batch)."}, []string{"partition"}),
		errors: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_batch_errors_total", Help: "Archive batches that failed and were retried."}),
		gaps: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_gaps_total",
			Help: "Deliveries that skipped ahead of the archive; the consumer was put back at the first missing entry."}),
	}
}

// Run archives until ctx ends.
func (a *Archiver) Run(ctx context.Context) error {
	cfg, err := streams.ArchiverConsumerConfig()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	progress, err := a.st.ArchiveProgress(ctx)
	if err != nil {
		return err
	}
	for p := 0; p < a.opts.Layout.InboxPartitions; p++ {
		cons, err := a.js.CreateOrUpdateConsumer(ctx, streams.InboxStream(p), cfg)
		if err != nil {
			return fmt.Errorf("archive: consumer on %s: %w", streams.InboxStream(p), err)
		}
		// Start right after what is archived: entries a predecessor was
		// handed and did not archive come back now, not after ack_wait.
		next := progress[p] + 1
		if _, err := a.js.ResetConsumerToSequence(ctx, streams.InboxStream(p), cfg.Durable, next); err != nil {
			a.log.Warn("reset archiver", zap.Int("partition", p), zap.Error(err))
		}
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			a.runPartition(ctx, p, cons, next)
		}(p)
	}
	wg.Wait()
	return ctx.Err()
}

// runPartition archives partition p from stream sequence next on. Its
// progress mark claims that every entry up to it is archived, and catch-up
// relies on that claim, so the archiver only ever archives a contiguous run
// of sequences: a delivery that skips ahead (entries handed to a pull
// request nobody read, a predecessor that died holding them) is not
// archived; the consumer is put back at the first missing sequence.
func (a *Archiver) runPartition(ctx context.Context, p int, cons jetstream.Consumer, next uint64) {
	log := a.log.With(zap.Int("partition", p))
	in := make(chan jetstream.Msg, 2*a.opts.BatchSize)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case in <- m:
		case <-ctx.Done():
		}
	},
		jetstream.PullMaxMessages(a.opts.BatchSize),
		jetstream.PullExpiry(a.opts.FetchWait),
		jetstream.PullPriorityGroup(streams.ArchiverGroup),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { log.Debug("consume", zap.Error(err)) }))
	if err != nil {
		log.Error("consume INBOX partition", zap.Error(err))
		return
	}
	defer cc.Stop()
	batch := make([]jetstream.Msg, 0, a.opts.BatchSize)
	entries := make([]store.ArchivedEntry, 0, a.opts.BatchSize)
	delay := 50 * time.Millisecond
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case m := <-in:
			batch = append(batch, m)
		}
	fill:
		for len(batch) < a.opts.BatchSize {
			select {
			case m := <-in:
				batch = append(batch, m)
			default:
				break fill
			}
		}
		var upTo, pending uint64
		var lastMsg jetstream.Msg
		gap := false
		entries = entries[:0]
		for _, m := range batch {
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			seq := md.Sequence.Stream
			if seq < next {
				lastMsg = m // archived before: a redelivery
				continue
			}
			if seq > next && next < a.firstSeq(ctx, p) {
				next = a.firstSeq(ctx, p) // the head expired (MaxAge): nothing to archive before it
			}
			if seq != next {
				gap = true
				break
			}
			next++
			upTo, pending, lastMsg = seq, md.NumPending, m
			// An entry that does not decode is skipped (logged, never archived)
			// so that it cannot stop the partition's archive.
			e, err := archivedEntry(m.Subject(), seq, m.Data())
			if err != nil {
				log.Error("undecodable inbox entry skipped", zap.String("subject", m.Subject()), zap.Uint64("seq", seq), zap.Error(err))
				continue
			}
			entries = append(entries, e)
		}
		if gap {
			a.gaps.Inc()
			if _, err := a.js.ResetConsumerToSequence(ctx, streams.InboxStream(p), "archiver", next); err != nil {
				log.Warn("reset archiver to the first missing entry", zap.Uint64("seq", next), zap.Error(err))
			}
			// Drop what is queued: it comes again after the reset.
		drop:
			for {
				select {
				case <-in:
				default:
					break drop
				}
			}
		}
		if len(entries) == 0 {
			if lastMsg != nil && !gap {
				_ = lastMsg.Ack()
			}
			continue
		}
		for {
			err := a.st.ArchiveEntries(ctx, p, entries, upTo)
			if err == nil {
				delay = 50 * time.Millisecond
				break
			}
			a.errors.Inc()
			if ctx.Err() != nil {
				return
			}
			log.Warn("archive batch failed; retrying", zap.Error(err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, 5*time.Second)
		}
		// AckPolicy all: the last archived message acknowledges the run.
		_ = lastMsg.Ack()
		a.entries.Add(float64(len(entries)))
		a.lag.WithLabelValues(strconv.Itoa(p)).Set(float64(pending))
	}
}

// archivedEntry is the archive row of the inbox entry at seq (streams
// decodes the subject and the body; the row keeps an event's position,
// up_to_conv_seq, in conv_seq as the entry does).
func archivedEntry(subject string, seq uint64, body []byte) (store.ArchivedEntry, error) {
	_, uid, err := streams.SubjectUID(subject)
	if err != nil {
		return store.ArchivedEntry{}, err
	}
	e, err := streams.DecodeEntry(body)
	if err != nil {
		return store.ArchivedEntry{}, err
	}
	return store.ArchivedEntry{UID: uid, Seq: seq, MsgID: e.MsgID, ConvID: e.ConvID, ConvSeq: e.ConvSeq,
		Kind: int16(e.Kind), Event: int16(e.EventType), Peer: e.EventPeer}, nil
}

// firstSeq returns the oldest sequence still in partition p's stream.
func (a *Archiver) firstSeq(ctx context.Context, p int) uint64 {
	s, err := a.js.Stream(ctx, streams.InboxStream(p))
	if err != nil {
		return 0
	}
	return s.CachedInfo().State.FirstSeq
}
