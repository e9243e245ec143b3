// Package archive copies every inbox entry from the INBOX partitions into
// Postgres inbox_archive, seconds behind the streams, and trims the streams
// to their hot window. The archive outlives the hot window, and it serves
// catch-up of older ranges by the (uid, seq) index, so that a device's
// catch-up costs its own backlog instead of a scan of everyone's traffic in
// its partition.
//
// Nothing leaves a stream before it is archived: the INBOX streams have no
// age limit, and the trimmer (trimmer.go) purges only entries that are both
// archived and older than the hot window. An entry that does not decode is
// kept in inbox_quarantine with its raw bytes (counted), and one removed
// from a stream by other means before it was archived is counted and logged
// as lost: the archive never passes an entry without a trace.
package archive

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/natsconn"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// DefaultLinger is Options.Linger's default.
const DefaultLinger = 200 * time.Millisecond

// Options configures the archiver.
type Options struct {
	Layout streams.Layout
	// BatchSize bounds the entries written in one transaction (default 5000).
	BatchSize int
	// Linger is how long a batch waits for more entries after its first
	// (default 200ms; negative: not at all, a batch is what is waiting).
	// An archive transaction costs a WAL flush, which every live message's
	// commit queues behind: archiving each entry as it came made the
	// archiver most of Postgres's commits at 200 live messages/s (commit
	// d3b9a26). The archive is the cold path, read for entries older
	// than the hot window; 200 ms behind costs nothing.
	Linger time.Duration
	// FetchWait is the expiry of one pull request (default 2s, below the
	// consumer's PinnedTTL; at least 1s).
	FetchWait time.Duration
	// HotWindow is the configured hot window (default
	// streams.DefaultHotWindow); it sets TrimEvery's default. The trimmer
	// trims by the window recorded on each stream, which equals it at start
	// (streams.EnsureStreams) and follows a documented change
	// (streams.ChangeHotWindow) without a restart.
	HotWindow time.Duration
	// TrimEvery is the trimmer's round: a tenth of the hot window, within
	// 1s..1m. A round also refreshes the lag metrics.
	TrimEvery time.Duration
	// SeparateTrimmer leaves the trimmer out of Run: the caller runs
	// RunTrimmer itself (on one syncer of a cluster at a time).
	SeparateTrimmer bool
	// InboxStreamConfig is the configuration a lost INBOX stream is created
	// again with (epoch.go); default: streams.InboxStreamConfig with
	// HotWindow recorded.
	InboxStreamConfig func(p int) (jetstream.StreamConfig, error)
}

// Archiver runs one writer per INBOX partition (pinned: among several
// syncers one archives a partition at a time).
type Archiver struct {
	opts Options
	log  *zap.Logger
	js   jetstream.JetStream
	st   *store.Store

	entries     prometheus.Counter
	batches     prometheus.Counter
	errors      prometheus.Counter
	gaps        prometheus.Counter
	skips       prometheus.Counter
	quarantined prometheus.Counter
	lost        prometheus.Counter
	trim        trimMetrics

	epochs prometheus.Counter // streams recreated or renumbered (epoch.go)
	// fenced counts streams found behind what Postgres records (fence.go),
	// fencedSeqs the seqs they had lost.
	fenced, fencedSeqs prometheus.Counter
	// raised counts conversations whose last_seq the archive found behind
	// their entries, missing message entries without their row (restore.go).
	raised, missing prometheus.Counter
	epochMu         []sync.Mutex    // per partition: one epoch check at a time
	restart         []chan struct{} // per partition: the stream changed, start over on it
	checked         chan struct{}   // closed when every partition's stream was checked once
	once            sync.Once       // closes checked
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
	if opts.Linger == 0 {
		opts.Linger = DefaultLinger
	}
	if opts.HotWindow <= 0 {
		opts.HotWindow = streams.DefaultHotWindow
	}
	if opts.TrimEvery <= 0 {
		opts.TrimEvery = min(max(opts.HotWindow/10, time.Second), time.Minute)
	}
	if opts.InboxStreamConfig == nil {
		l, w := opts.Layout, opts.HotWindow
		opts.InboxStreamConfig = func(p int) (jetstream.StreamConfig, error) {
			c, err := streams.InboxStreamConfig(l, p)
			streams.SetHotWindow(&c, w)
			return c, err
		}
	}
	f := promauto.With(reg)
	restart := make([]chan struct{}, opts.Layout.InboxPartitions)
	for p := range restart {
		restart[p] = make(chan struct{}, 1)
	}
	return &Archiver{
		epochs: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_stream_epochs_total",
			Help: "INBOX streams found lost or recreated and numbered again above every earlier sequence (a new stream epoch)."}),
		fenced: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_streams_fenced_total",
			Help: "INBOX streams found behind what Postgres records of them (they lost entries: a power cut before their fsync, a restored backup) and fenced: sequences go on above every known one, the lost range is served from the archive."}),
		fencedSeqs: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_fenced_seqs_total",
			Help: "Sequences the fenced INBOX streams had lost (served from the archive where Postgres recorded them)."}),
		raised: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_conv_seq_raised_total",
			Help: "Conversations whose last_seq Postgres had below a conv_seq of their inbox entries (Postgres restored to an earlier point), raised so that no conv_seq is handed out twice."}),
		missing: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_entries_without_message_total",
			Help: "Inbox entries of messages whose msg_content row Postgres does not hold (Postgres restored to an earlier point): their bodies are lost, devices get them as expired."}),
		epochMu: make([]sync.Mutex, opts.Layout.InboxPartitions),
		restart: restart,
		checked: make(chan struct{}),
		opts:    opts, log: log, js: js, st: st,
		entries: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_entries_total", Help: "Inbox entries copied to inbox_archive."}),
		errors:  f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_batch_errors_total", Help: "Archive batches that failed and were retried."}),
		batches: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_batches_total",
			Help: "Archive transactions committed: each costs Postgres a WAL flush, so a batch gathers the entries of 200 ms after its first."}),
		gaps: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_gaps_total",
			Help: "Deliveries that skipped ahead of the archive; the consumer was put back at the first missing entry."}),
		skips: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_skips_total",
			Help: "Batches of entries archived before (a consumer that started over below the mark); the consumer was put at the mark."}),
		quarantined: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_quarantined_entries_total",
			Help: "Inbox entries that did not decode, kept with their raw bytes in inbox_quarantine instead of inbox_archive."}),
		lost: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_lost_entries_total",
			Help: "Inbox entries removed from their stream by other means than the trimmer before the archiver copied them (a purge by hand): must stay 0."}),
		trim: newTrimMetrics(f),
	}
}

// Checked is closed once Run has checked every partition's stream against
// what Postgres records (epochs, fences) for the first time: a process
// that also publishes into the streams starts its fanout and gateway
// after it, so that none of them writes into a stream before it is
// fenced.
func (a *Archiver) Checked() <-chan struct{} { return a.checked }

// Run archives until ctx ends.
func (a *Archiver) Run(ctx context.Context) error {
	defer a.once.Do(func() { close(a.checked) }) // a Run that fails early checked nothing: nobody waits for it
	cfg, err := streams.ArchiverConsumerConfig()
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	// The first start of every partition is checked here, so that a
	// configuration error fails the start.
	first := make([]jetstream.Consumer, a.opts.Layout.InboxPartitions)
	epochs := make([]uint64, len(first))
	for p := range first {
		if first[p], epochs[p], err = a.startPartition(ctx, p, cfg); err != nil {
			if !natsconn.Unanswered(err) || ctx.Err() != nil {
				return err
			}
			// A NATS that does not answer yet (a node rejoining its
			// cluster, a meta leader being elected) is no configuration
			// error: the partition's loop below starts it again each
			// second, instead of the archiver stopping for good.
			a.log.Warn("start the archiver of a partition; retrying", zap.Int("partition", p), zap.Error(err))
			first[p] = nil
		}
	}
	a.once.Do(func() { close(a.checked) })
	if !a.opts.SeparateTrimmer {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.runTrimmer(ctx)
		}()
	}
	for p := range first {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			cons, epoch := first[p], epochs[p]
			for ctx.Err() == nil {
				if cons != nil {
					next, err := a.st.ArchivedThrough(ctx, p)
					if err == nil {
						a.runPartition(ctx, p, epoch, cons, next+1)
					}
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
				// The consumer was lost (its stream with it): check the
				// stream's epoch and start over on the stream there is.
				var err error
				if cons, epoch, err = a.startPartition(ctx, p, cfg); err != nil {
					a.log.Warn("restart the archiver of a partition", zap.Int("partition", p), zap.Error(err))
				}
			}
		}(p)
	}
	wg.Wait()
	return ctx.Err()
}

// startPartition checks partition p's stream epoch (epoch.go) and creates
// the archiver's consumer on it, positioned right after what is archived:
// entries a predecessor was handed and did not archive come back now, not
// after ack_wait. It returns the consumer and the stream epoch it reads.
func (a *Archiver) startPartition(ctx context.Context, p int, cfg jetstream.ConsumerConfig) (jetstream.Consumer, uint64, error) {
	recs, err := a.st.ArchiveEpochs(ctx)
	if err != nil {
		return nil, 0, err
	}
	if _, err := a.checkEpoch(ctx, a.log, p, recs[p]); err != nil {
		return nil, 0, fmt.Errorf("archive: stream epoch of %s: %w", streams.InboxStream(p), err)
	}
	// What the stream holds beyond the mark is archived before anything
	// else starts (Checked): a Postgres restored to an earlier point learns
	// here the conv_seqs it lost (restore.go) before a fanout of this
	// process hands them out again.
	if err := a.catchUp(ctx, p); err != nil {
		return nil, 0, fmt.Errorf("archive: catch up %s: %w", streams.InboxStream(p), err)
	}
	// Its state is in memory (streams.EnsureConsumer says why): a NATS
	// restart loses it, and it is created here again from the mark.
	cons, kept, err := streams.EnsureConsumer(ctx, a.js, streams.InboxStream(p), cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("archive: consumer on %s: %w", streams.InboxStream(p), err)
	}
	if kept {
		a.log.Warn("the archiver consumer of an older installation keeps its file storage: it costs CPU while it moves; "+
			"docs/operations.md, 'Upgrading: the consumers storage', moves it to memory", zap.Int("partition", p))
	}
	// The epoch recorded after the consumer exists: a consumer of a stream
	// that was replaced since gets its batches refused (ErrEpochChanged).
	if recs, err = a.st.ArchiveEpochs(ctx); err != nil {
		return nil, 0, err
	}
	mark := recs[p].Archived
	if _, err := a.js.ResetConsumerToSequence(ctx, streams.InboxStream(p), cfg.Durable, mark+1); err != nil {
		a.log.Warn("reset archiver", zap.Int("partition", p), zap.Error(err))
	}
	select {
	case <-a.restart[p]: // this start handles it
	default:
	}
	return cons, recs[p].StreamEpoch, nil
}

// restartPartition makes partition p's archiver start over (its stream
// changed or its consumer is gone).
func (a *Archiver) restartPartition(p int) {
	select {
	case a.restart[p] <- struct{}{}:
	default:
	}
}

// runPartition archives partition p from stream sequence next on. Its
// progress mark claims that every entry up to it is archived, and catch-up
// relies on that claim, so the archiver only ever archives a contiguous run
// of sequences: a delivery that skips ahead (entries handed to a pull
// request nobody read, a predecessor that died holding them) is not
// archived; the consumer is put back at the first missing sequence.
func (a *Archiver) runPartition(ctx context.Context, p int, epoch uint64, cons jetstream.Consumer, next uint64) {
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
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			log.Debug("consume", zap.Error(err))
			if streams.ConsumerLost(err) {
				a.restartPartition(p) // a lost consumer (with its stream): start over
			}
		}))
	if err != nil {
		log.Error("consume INBOX partition", zap.Error(err))
		return
	}
	defer cc.Stop()
	batch := make([]jetstream.Msg, 0, a.opts.BatchSize)
	entries := make([]store.ArchivedEntry, 0, a.opts.BatchSize)
	var quarantined []store.QuarantinedEntry
	delay := 50 * time.Millisecond
	linger := time.NewTimer(time.Hour) // Reset per batch (Go 1.23 timers: no stale ticks to drain)
	linger.Stop()
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case <-a.restart[p]:
			return
		case m := <-in:
			batch = append(batch, m)
		}
		var lingered <-chan time.Time // nil: take what is waiting
		if a.opts.Linger > 0 {
			linger.Reset(a.opts.Linger)
			lingered = linger.C
		}
	fill:
		for len(batch) < a.opts.BatchSize {
			select {
			case m := <-in:
				batch = append(batch, m)
				continue
			default:
			}
			if lingered == nil {
				break
			}
			select {
			case m := <-in:
				batch = append(batch, m)
			case <-lingered:
				lingered = nil
				break fill
			case <-ctx.Done():
				return
			case <-a.restart[p]:
				return
			}
		}
		linger.Stop()
		var upTo, behind uint64
		var lastMsg jetstream.Msg
		gap := false
		entries, quarantined = entries[:0], quarantined[:0]
		for _, m := range batch {
			md, err := m.Metadata()
			if err != nil {
				continue
			}
			seq := md.Sequence.Stream
			if seq < next {
				lastMsg, behind = m, seq // archived before: a redelivery
				continue
			}
			if seq > next {
				next = a.skipRemoved(ctx, log, p, next, seq)
			}
			if seq != next {
				gap = true
				break
			}
			next++
			upTo, lastMsg = seq, m
			// An entry that does not decode cannot stop the partition's
			// archive, and it is not passed without a trace either: it is
			// kept with its raw bytes, in the transaction that passes it.
			e, err := archivedEntry(m.Subject(), seq, m.Data())
			if err != nil {
				log.Error("undecodable inbox entry quarantined", zap.String("subject", m.Subject()), zap.Uint64("seq", seq), zap.Error(err))
				quarantined = append(quarantined, store.QuarantinedEntry{Partition: p, Seq: seq, Subject: m.Subject(), Raw: m.Data(), Err: err.Error()})
				continue
			}
			entries = append(entries, e)
		}
		if gap {
			a.gaps.Inc()
			a.resetTo(ctx, log, p, next, in, "reset archiver to the first missing entry")
		}
		if upTo == 0 {
			if lastMsg != nil && !gap {
				_ = lastMsg.Ack()
			}
			// A whole batch archived before: the consumer starts over
			// below the mark (its state is in memory, and a cluster that
			// restarted every server recreates it from its definition at
			// the stream's first entry). Put it at the mark instead of
			// reading the hot window through to get there.
			if behind > 0 && behind+1 < next && !gap {
				a.skips.Inc()
				a.resetTo(ctx, log, p, next, in, "reset archiver to its mark")
			}
			continue
		}
		for {
			err := a.store(ctx, log, p, epoch, entries, quarantined, upTo)
			if err == nil {
				delay = 50 * time.Millisecond
				break
			}
			if errors.Is(err, store.ErrEpochChanged) {
				// Read from a stream that was lost meanwhile; the new one
				// took the sequences after the mark (epoch.go).
				a.lost.Add(float64(len(entries) + len(quarantined)))
				log.Error("inbox entries of a lost stream were not archived in time: gone with it",
					zap.Uint64("up_to_seq", upTo), zap.Int("entries", len(entries)+len(quarantined)))
				return
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
		a.batches.Inc()
		a.quarantined.Add(float64(len(quarantined)))
		log.Debug("archived", zap.Uint64("up_to", upTo), zap.Int("entries", len(entries)), zap.Int("quarantined", len(quarantined)))
	}
}

// resetTo puts partition p's consumer at seq and drops what is queued
// from before: it comes again after the reset.
func (a *Archiver) resetTo(ctx context.Context, log *zap.Logger, p int, seq uint64, in chan jetstream.Msg, what string) {
	if _, err := a.js.ResetConsumerToSequence(ctx, streams.InboxStream(p), "archiver", seq); err != nil {
		log.Warn(what, zap.Uint64("seq", seq), zap.Error(err))
	}
	for {
		select {
		case <-in:
		default:
			return
		}
	}
}

// skipRemoved is called when the consumer delivered seq while next is the
// first entry not archived yet. Either the entries in between went to a
// pull request nobody read (a gap: the consumer is put back), or they are
// no longer in the stream: the trimmer never removes an unarchived entry,
// so something else did (an operator's purge). Those are counted and
// logged as lost, and the archive goes on after them. It returns the next
// entry to archive.
func (a *Archiver) skipRemoved(ctx context.Context, log *zap.Logger, p int, next, seq uint64) uint64 {
	first, _, found, err := directGet(ctx, a.js.Conn(), p, directGetRequest{Seq: next, NextFor: inboxSubjects(p)})
	if err != nil || !found || first <= next {
		return next
	}
	to := min(first, seq)
	a.lost.Add(float64(to - next))
	log.Error("inbox entries were removed from the stream before they were archived",
		zap.Uint64("from_seq", next), zap.Uint64("to_seq", to-1), zap.Uint64("entries", to-next))
	return to
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
		Kind: int16(e.Kind), Event: int16(e.EventType), Peer: e.EventPeer, CreatedAtMs: e.CreatedAtMs}, nil
}
