package archive

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// Early cleanup removes from the hot layer (the INBOX streams) the entries
// no device will read from there again, long before the hot window would:
// per user, JetStream purges the user's subject inbox.<p>.<uid> below
//
//	S = min(lowest ack_seq of the user's device_cursor rows + 1,
//	        archive_progress.archived_seq of the partition + 1,
//	        the first entry the new-device window needs)
//
// Every device that still counts has a device_cursor row (the mirror of its
// confirmed cursor, written within a second of its first login and kept
// when its consumer is reaped), and a device only ever resumes after its
// confirmed cursor, so nothing at or above S is something a device has not
// confirmed; nothing below archived_seq+1 is missing from the archive
// (item 2), which still serves every range a catch-up or a conversation
// reads; and a device logging in for the first time finds its window in
// the stream. The purge is the only way entries leave the streams besides
// the partition trimmer: deny_delete stays true, deny_purge false.
//
// A device's cursor is read from its mirror row, never from its consumer:
// the row exists for every device that counts, including those whose
// consumer was reaped, and one indexed read covers a batch of users where
// consumer infos would cost a JetStream request per device. A purge moves
// the consumers filtered to the subject up to S-1 (JetStream does that for
// consumers on a purged subject), which is at or below their confirmed
// position. A consumer with no row is one of a device in the second before
// its first cursor write, which the margin covers (a new device starts at
// the window as it was when it logged in, and the cleanup keeps the window
// as it was Margin ago), or one housekeeping left behind after forgetting
// its row: housekeeping must delete a device's consumer before its row.
//
// Rounds are small and independent: a round reads Batch users after the
// previous round's last uid (a sweep through every user with entries,
// wrapping around), one direct get per user tells whether its subject
// holds anything below S, and purges are paced by Rate. Its only state is
// the sweep position and a few archive marks per partition, in memory: a
// restarted syncer begins a new sweep.

// CleanupOptions configures the early cleanup.
type CleanupOptions struct {
	Layout streams.Layout
	// Every is the pause between rounds (default 10s).
	Every time.Duration
	// Rate bounds the JetStream purges per second (default 20): each holds
	// its partition's stream lock, which sends and catch-up reads share.
	Rate float64
	// Batch is the number of users a round looks at (default 1000).
	Batch int
	// Margin: the cleanup keeps the new-device window as it was this long
	// ago (default 1m), which covers a new device's first cursor write
	// (about a second after its login) and clock skew between gateways,
	// syncers and the NATS server.
	Margin time.Duration
	// NewDeviceWindow and NewDeviceMax are the gateway's settings of the
	// same names: a device's first login replays its inbox entries of the
	// last NewDeviceWindow, at most NewDeviceMax of them. Required.
	NewDeviceWindow time.Duration
	NewDeviceMax    int
}

// DefaultCleanupOptions returns the defaults of the cleanup's own settings.
func DefaultCleanupOptions() CleanupOptions {
	return CleanupOptions{Layout: streams.DefaultLayout, Every: 10 * time.Second, Rate: 20, Batch: 1000, Margin: time.Minute}
}

// Cleaner runs the early cleanup.
type Cleaner struct {
	opts   CleanupOptions
	log    *zap.Logger
	nc     *nats.Conn
	st     *store.Store
	purges *rate.Limiter

	// Only the loop's goroutine touches these.
	after      int64       // the sweep's position: the last uid looked at
	sweepStart time.Time   // when the current sweep began
	marks      [][]arcMark // per partition: archived_seq as read by recent rounds, oldest first

	removed   prometheus.Counter
	purged    prometheus.Counter
	errors    prometheus.Counter
	users     prometheus.Counter
	roundTime prometheus.Histogram
	sweepTime prometheus.Gauge
}

// arcMark is a partition's archived_seq as a round read it.
type arcMark struct {
	at  time.Time
	seq uint64
}

// NewCleaner returns an early cleanup; nc is a connection of the syncer
// (purges and direct gets of the INBOX streams).
func NewCleaner(opts CleanupOptions, log *zap.Logger, nc *nats.Conn, st *store.Store, reg prometheus.Registerer) (*Cleaner, error) {
	d := DefaultCleanupOptions()
	if opts.Layout == (streams.Layout{}) {
		opts.Layout = d.Layout
	}
	if opts.Every <= 0 {
		opts.Every = d.Every
	}
	if opts.Rate <= 0 {
		opts.Rate = d.Rate
	}
	if opts.Batch <= 0 {
		opts.Batch = d.Batch
	}
	if opts.Margin <= 0 {
		opts.Margin = d.Margin
	}
	if opts.NewDeviceWindow <= 0 || opts.NewDeviceMax < 1 {
		return nil, fmt.Errorf("archive: cleanup: new-device window %s and max %d must be positive (the gateway's --new-device-window and --new-device-max)",
			opts.NewDeviceWindow, opts.NewDeviceMax)
	}
	f := promauto.With(reg)
	return &Cleaner{
		opts: opts, log: log, nc: nc, st: st,
		purges: rate.NewLimiter(rate.Limit(opts.Rate), 1),
		marks:  make([][]arcMark, opts.Layout.InboxPartitions),
		removed: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_cleanup_entries_removed_total",
			Help: "Inbox entries the early cleanup purged from the INBOX streams (confirmed by every device, archived, outside the new-device window)."}),
		purged: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_cleanup_purges_total", Help: "JetStream purges of one user's subject by the early cleanup."}),
		errors: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_cleanup_errors_total", Help: "Early cleanup rounds that failed (retried from the same position)."}),
		users:  f.NewCounter(prometheus.CounterOpts{Name: "inboxd_cleanup_users_checked_total", Help: "Users the early cleanup looked at."}),
		roundTime: f.NewHistogram(prometheus.HistogramOpts{Name: "inboxd_cleanup_round_seconds", Help: "Duration of one early cleanup round.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 9)}),
		sweepTime: f.NewGauge(prometheus.GaugeOpts{Name: "inboxd_cleanup_sweep_seconds",
			Help: "Duration of the last complete sweep through every user with entries: how long entries every device confirmed may wait to be removed (its lag)."}),
	}, nil
}

// Run cleans up until ctx ends, one round every Every.
func (c *Cleaner) Run(ctx context.Context) error {
	t := time.NewTimer(c.opts.Every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if _, err := c.round(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.errors.Inc()
			c.log.Warn("cleanup round failed; retried next round", zap.Int64("after_uid", c.after), zap.Error(err))
		}
		t.Reset(c.opts.Every)
	}
}

// roundStats is what one round did.
type roundStats struct {
	users, purges int
	removed       uint64
	swept         bool // the round ended a sweep
}

// cleanupCandidate is a user of the round with the bound its devices and
// the archive allow.
type cleanupCandidate struct {
	uid   int64
	p     int
	upper uint64 // min(lowest ack + 1, archived_seq + 1)
}

// round looks at the next Batch users of the sweep and purges what each
// may lose.
func (c *Cleaner) round(ctx context.Context) (roundStats, error) {
	start := time.Now()
	defer func() { c.roundTime.Observe(time.Since(start).Seconds()) }()
	var rs roundStats
	if c.sweepStart.IsZero() {
		c.sweepStart = start
	}
	// Read fresh each round, before the users: archived_seq only grows, so
	// a mark older than the round is on the safe side.
	progress, err := c.st.ArchiveProgress(ctx)
	if err != nil {
		return rs, err
	}
	c.mark(start, progress)
	current, err := c.currentEpochs(ctx)
	if err != nil {
		return rs, err
	}
	users, err := c.st.CleanupUsers(ctx, c.after, c.opts.Batch)
	if err != nil {
		return rs, err
	}
	rs.users = len(users)
	c.users.Add(float64(len(users)))
	next := int64(0) // a short batch ends the sweep: the next round starts over
	if len(users) == c.opts.Batch {
		next = users[len(users)-1].UID
	}

	windowSince := start.Add(-c.opts.NewDeviceWindow - c.opts.Margin)
	windowFrom := map[int]uint64{} // per partition: its first entry stored at or after windowSince
	var cands []cleanupCandidate
	var nthUIDs []int64
	var nthUpTo []uint64
	for _, u := range users {
		p := ids.Partition(u.UID, c.opts.Layout.InboxPartitions)
		if !current[p] {
			continue // the stream is not the one its mark counts in (epoch.go)
		}
		upper := progress[p] + 1 // never an entry the archiver has not copied
		if u.Devices > 0 {
			upper = min(upper, u.LowestAck+1) // nor one a device has not confirmed
		}
		if upper <= 1 {
			continue
		}
		from, ok := windowFrom[p]
		if !ok {
			if from, err = c.firstSince(ctx, p, windowSince); err != nil {
				return rs, err
			}
			windowFrom[p] = from
		}
		cands = append(cands, cleanupCandidate{uid: u.UID, p: p, upper: upper})
		// Within the window by time: only the newest NewDeviceMax of those
		// are replayed to a new device, counted (as the gateway does) among
		// archived entries, here among those archived Margin ago.
		if from < upper {
			if upTo := c.archivedAsOf(p, start.Add(-c.opts.Margin)); upTo > 0 {
				nthUIDs, nthUpTo = append(nthUIDs, u.UID), append(nthUpTo, upTo)
			}
		}
	}
	nth, err := c.st.NthNewestSeqsUpTo(ctx, nthUIDs, nthUpTo, c.opts.NewDeviceMax)
	if err != nil {
		return rs, err
	}
	for _, k := range cands {
		window := windowFrom[k.p]
		if n, ok := nth[k.uid]; ok {
			window = max(window, n)
		}
		s := min(k.upper, window)
		if s <= 1 {
			continue
		}
		first, found, err := c.firstEntry(ctx, k.p, k.uid)
		if err != nil {
			return rs, err
		}
		if !found || first >= s {
			continue // nothing of the user's below s is left in the stream
		}
		if err := c.purges.Wait(ctx); err != nil {
			return rs, err
		}
		n, err := c.purge(ctx, k.p, k.uid, s)
		if err != nil {
			return rs, err
		}
		rs.purges++
		rs.removed += n
		c.purged.Inc()
		c.removed.Add(float64(n))
	}
	c.after = next
	if next == 0 {
		rs.swept = true
		c.sweepTime.Set(time.Since(c.sweepStart).Seconds())
		c.sweepStart = time.Time{}
	}
	c.log.Debug("cleanup round", zap.Int("users", rs.users), zap.Int("purges", rs.purges), zap.Uint64("removed", rs.removed),
		zap.Int64("next_uid", next), zap.Duration("took", time.Since(start)))
	return rs, nil
}

// mark records the partitions' archived_seq as read at now, keeping per
// partition the marks younger than Margin and the newest older one.
func (c *Cleaner) mark(now time.Time, progress map[int]uint64) {
	cut := now.Add(-c.opts.Margin)
	for p := range c.marks {
		m := append(c.marks[p], arcMark{at: now, seq: progress[p]})
		i := 0
		for i+1 < len(m) && !m[i+1].at.After(cut) {
			i++
		}
		c.marks[p] = append(m[:0], m[i:]...)
	}
}

// archivedAsOf returns partition p's archived_seq as a round read it at or
// before t (0: no round read it that early). Every entry at or below it
// was in the archive at t and has been since: what a new device that
// logged in after t counted its newest NewDeviceMax among.
func (c *Cleaner) archivedAsOf(p int, t time.Time) uint64 {
	var seq uint64
	for _, m := range c.marks[p] {
		if m.at.After(t) {
			break
		}
		seq = m.seq
	}
	return seq
}

// firstSince returns the sequence of partition p's first entry stored at
// or after t (the entry a new device's consumer created with that start
// time begins at), or MaxUint64 when every entry is older.
func (c *Cleaner) firstSince(ctx context.Context, p int, t time.Time) (uint64, error) {
	t = t.UTC()
	seq, _, found, err := directGet(ctx, c.nc, p, directGetRequest{StartTime: &t, NextFor: inboxSubjects(p)})
	if !found && err == nil {
		return math.MaxUint64, nil
	}
	return seq, err
}

// firstEntry returns the sequence of the oldest entry of uid's subject
// still in its partition's stream.
func (c *Cleaner) firstEntry(ctx context.Context, p int, uid int64) (uint64, bool, error) {
	seq, _, found, err := directGet(ctx, c.nc, p, directGetRequest{NextFor: streams.InboxSubject(p, uid)})
	return seq, found, err
}

// purge removes uid's entries below seq from its partition's stream and
// returns how many went.
func (c *Cleaner) purge(ctx context.Context, p int, uid int64, seq uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	n, err := purge(ctx, c.nc, streams.InboxStream(p), streams.InboxSubject(p, uid), seq)
	if err != nil {
		return 0, fmt.Errorf("archive: cleanup: %w", err)
	}
	c.log.Debug("purged", zap.Int64("uid", uid), zap.Uint64("below_seq", seq), zap.Uint64("entries", n))
	return n, nil
}

// currentEpochs tells, per partition, whether its stream is the one the
// archive mark counts in (epoch.go): a stream recreated by hand or restored
// numbers its entries below the mark until the syncer renumbered it, and
// the cleanup must not take them for archived ones meanwhile.
func (c *Cleaner) currentEpochs(ctx context.Context) ([]bool, error) {
	recs, err := c.st.ArchiveEpochs(ctx)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(c.nc)
	if err != nil {
		return nil, err
	}
	out := make([]bool, c.opts.Layout.InboxPartitions)
	for p := range out {
		s, err := js.Stream(ctx, streams.InboxStream(p))
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("look up %s: %w", streams.InboxStream(p), err)
		}
		info := s.CachedInfo()
		r := recs[p]
		// 0: not recorded yet (the archiver adopts such a stream, epoch.go).
		out[p] = (r.StreamEpoch == epochOf(info) || r.StreamEpoch == 0) && info.State.LastSeq >= r.Archived
	}
	return out, nil
}
