// Package retention is the syncer's data lifecycle job for Postgres: it
// keeps the time ranges of msg_content and inbox_archive created ahead of
// time, and removes the ranges that are entirely older than --retention
// (whole partitions: detach and drop, never a long DELETE), keeping the
// rows of conversations under legal hold. Before a range goes, each of its
// conversations' retention horizon is recorded, so pages, pulls and the
// summary answer "expired" for it instead of pointing at missing bodies.
package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/store"
)

// Options configures the job. The zero value keeps everything forever in
// monthly ranges.
type Options struct {
	// Retention removes messages (bodies and inbox entries) older than
	// this; 0 keeps them forever. A range goes once all of it is older.
	Retention time.Duration
	// Width of a range: 0 cuts calendar months (UTC); tests use seconds.
	Width time.Duration
	// Ahead: ranges exist at least this far past now (default: two
	// widths and at least 30 s, for months the current month and the next
	// two), so that a syncer that is down for less than that stops no
	// send. The 30 s floor is for short test widths: a job delayed by a
	// loaded machine for 10 s made sends fail for want of a range.
	Ahead time.Duration
	// Every is the period of the job (default: a quarter of a width, at
	// least 100 ms and at most 10 minutes).
	Every time.Duration
	// Hold is the installation-wide legal hold: nothing is removed.
	Hold bool
	// Batch bounds the conversations of one horizon upsert (default 5000).
	Batch int
	// Now is the clock (tests); default time.Now.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.Every <= 0 {
		o.Every = 10 * time.Minute
		if o.Width > 0 {
			o.Every = min(max(o.Width/4, 100*time.Millisecond), 10*time.Minute)
		}
	}
	if o.Batch <= 0 {
		o.Batch = 5000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// until is the end ranges must reach at now.
func (o *Options) until(now time.Time) time.Time {
	switch {
	case o.Ahead > 0:
		return now.Add(o.Ahead)
	case o.Width <= 0:
		return now.AddDate(0, 2, 0)
	default:
		return now.Add(max(2*o.Width, 30*time.Second))
	}
}

// Job is the retention job. One runs in every syncer; an advisory lock in
// Postgres lets one of them work at a time.
type Job struct {
	opts Options
	log  *zap.Logger
	st   *store.Store
	grid func(int64) int64
	m    metrics
}

type metrics struct {
	ranges      *prometheus.CounterVec
	rows        *prometheus.CounterVec
	kept        prometheus.Counter
	bytes       prometheus.Counter
	horizons    prometheus.Counter
	errors      prometheus.Counter
	created     prometheus.Counter
	lag         prometheus.Gauge
	ahead       prometheus.Gauge
	hold        prometheus.Gauge
	heldConvs   prometheus.Gauge
	rangesExist prometheus.Gauge
	lastRun     prometheus.Gauge
	horizonAt   prometheus.Gauge
}

// New returns a job on st (a pool of its own is best: its long reads of a
// whole range should not take connections from sends and syncs).
func New(opts Options, log *zap.Logger, st *store.Store, reg prometheus.Registerer) *Job {
	opts.defaults()
	f := promauto.With(reg)
	j := &Job{opts: opts, log: log, st: st, grid: store.RangeGrid(opts.Width), m: metrics{
		ranges: f.NewCounterVec(prometheus.CounterOpts{Name: "inboxd_retention_ranges_total",
			Help: "Time ranges retention removed (dropped) or rebuilt keeping held conversations' rows."}, []string{"result"}),
		rows: f.NewCounterVec(prometheus.CounterOpts{Name: "inboxd_retention_rows_removed_total",
			Help: "Rows retention removed, per table."}, []string{"table"}),
		kept: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_retention_rows_kept_total",
			Help: "Rows of held conversations kept when their expired range was rebuilt."}),
		bytes: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_retention_bytes_freed_total",
			Help: "Disk retention freed (partition sizes with indexes)."}),
		horizons: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_retention_horizons_total",
			Help: "Conversations whose retention horizon was recorded (one per conversation and range)."}),
		errors: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_retention_errors_total",
			Help: "Retention runs that failed (retried at the next run)."}),
		created: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_retention_ranges_created_total",
			Help: "Time ranges created ahead of time."}),
		lag: f.NewGauge(prometheus.GaugeOpts{Name: "inboxd_retention_lag_seconds",
			Help: "How far the oldest range that should be gone is past the horizon (0: retention is up to date)."}),
		ahead: f.NewGauge(prometheus.GaugeOpts{Name: "inboxd_retention_ranges_ahead_seconds",
			Help: "How far past now the newest range reaches: when it runs out, sends fail."}),
		hold: f.NewGauge(prometheus.GaugeOpts{Name: "inboxd_retention_legal_hold",
			Help: "1 under the installation-wide legal hold (--legal-hold): nothing is removed."}),
		heldConvs: f.NewGauge(prometheus.GaugeOpts{Name: "inboxd_retention_held_conversations",
			Help: "Conversations under legal hold."}),
		rangesExist: f.NewGauge(prometheus.GaugeOpts{Name: "inboxd_retention_ranges",
			Help: "Time ranges of msg_content and inbox_archive."}),
		lastRun: f.NewGauge(prometheus.GaugeOpts{Name: "inboxd_retention_last_run_timestamp_seconds",
			Help: "When the last retention run succeeded."}),
		horizonAt: f.NewGauge(prometheus.GaugeOpts{Name: "inboxd_retention_horizon_timestamp_seconds",
			Help: "The retention horizon of the last run: messages before it go (0: kept forever)."}),
	}}
	if opts.Hold {
		j.m.hold.Set(1)
	}
	return j
}

// Run runs the job at once and then every Every until ctx ends.
func (j *Job) Run(ctx context.Context) error {
	t := time.NewTicker(j.opts.Every)
	defer t.Stop()
	for {
		if err := j.RunOnce(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			j.m.errors.Inc()
			j.log.Warn("retention run failed; retried at the next", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// RunOnce finishes what an interrupted run left, creates the ranges due,
// and removes those past the horizon.
func (j *Job) RunOnce(ctx context.Context) error {
	now := j.opts.Now()
	if _, err := j.st.Reconcile(ctx); err != nil {
		return err
	}
	created, err := j.st.EnsureRanges(ctx, ids.AtTime(j.opts.until(now)), j.grid)
	j.m.created.Add(float64(len(created)))
	for _, r := range created {
		j.log.Debug("range created", zap.String("range", r.Name), zap.Time("from", ids.Time(r.Lo)), zap.Time("to", ids.Time(r.Hi)))
	}
	if err != nil {
		return err
	}
	held, err := j.st.Holds(ctx)
	if err != nil {
		return err
	}
	j.m.heldConvs.Set(float64(len(held)))
	if j.opts.Retention > 0 && !j.opts.Hold {
		horizon := now.Add(-j.opts.Retention)
		j.m.horizonAt.Set(float64(horizon.UnixMilli()) / 1000)
		if err := j.expire(ctx, ids.AtTime(horizon)); err != nil {
			return err
		}
	}
	ranges, err := j.st.Ranges(ctx)
	if err != nil {
		return err
	}
	j.m.rangesExist.Set(float64(len(ranges)))
	if len(ranges) > 0 {
		j.m.ahead.Set(ids.Time(ranges[len(ranges)-1].Hi).Sub(now).Seconds())
	}
	lag := 0.0
	if j.opts.Retention > 0 && !j.opts.Hold {
		horizon := now.Add(-j.opts.Retention)
		for _, r := range ranges {
			if r.Gen == 0 && ids.Time(r.Hi).Before(horizon) {
				lag = max(lag, horizon.Sub(ids.Time(r.Hi)).Seconds())
			}
		}
	}
	j.m.lag.Set(lag)
	j.m.lastRun.Set(float64(now.UnixMilli()) / 1000)
	return nil
}

// expire removes, oldest first, every range that ends at or before the
// horizon key.
func (j *Job) expire(ctx context.Context, horizon int64) error {
	ranges, err := j.st.Ranges(ctx)
	if err != nil {
		return err
	}
	for _, r := range ranges {
		if r.Hi > horizon {
			break
		}
		log := j.log.With(zap.String("range", r.Name), zap.Time("from", ids.Time(r.Lo)), zap.Time("to", ids.Time(r.Hi)))
		batches := 0
		st, err := j.st.ExpireRange(ctx, r, j.opts.Batch, func(convs int) {
			batches++
			log.Debug("retention horizons recorded", zap.Int("batch", batches), zap.Int("conversations", convs))
		})
		j.m.horizons.Add(float64(st.Horizons))
		if err != nil {
			return fmt.Errorf("retention: range %s: %w", r.Name, err)
		}
		if st.Unchanged {
			continue
		}
		for table, n := range st.Removed {
			j.m.rows.WithLabelValues(table).Add(float64(n))
		}
		j.m.kept.Add(float64(st.Kept))
		j.m.bytes.Add(float64(max(st.Bytes, 0)))
		result := "dropped"
		if st.Rebuilt {
			result = "rebuilt"
		}
		j.m.ranges.WithLabelValues(result).Inc()
		log.Info("retention removed a range", zap.String("result", result), zap.Int64("messages", st.Removed["msg_content"]),
			zap.Int64("inbox_entries", st.Removed["inbox_archive"]), zap.Int64("kept_rows", st.Kept),
			zap.Int64("bytes", st.Bytes), zap.Int64("conversations", st.Horizons))
	}
	return nil
}
