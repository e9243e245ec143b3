// Package lifecycle is the syncer's part of a message's life after
// delivery: deleting one user's data on request (a resumable job of
// idempotent steps, deletion.go), background housekeeping of the rows and
// consumers nothing needs any more (housekeeping.go), and the figures of
// what is on disk (usage.go).
package lifecycle

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// Options configures the lifecycle jobs. Zero values take the defaults
// (DefaultOptions).
type Options struct {
	Layout streams.Layout

	// DeviceForget: a device unseen this long loses its device_cursor row
	// and its consumer (if one is left); it logs in again as a new device
	// (the new-device window). 0: never.
	DeviceForget time.Duration
	// DeviceReap is the gateways' --device-reap: a device consumer whose
	// device was unseen longer (and an hour more) should have been reaped
	// by the server; housekeeping deletes one that is left. 0: never.
	DeviceReap time.Duration
	// RejectHorizon: send_reject rows older than this are deleted; a
	// retry of such a send after it is judged again. 0: kept forever.
	RejectHorizon time.Duration
	// Every is the housekeeping interval. 0: no housekeeping.
	Every time.Duration
	// LegalHold is the installation-wide legal hold: a user deletion keeps
	// every body the user sent (conversations' own holds come from Holds).
	LegalHold bool

	// Batch bounds the rows one statement of a job or of housekeeping
	// removes (default 1000).
	Batch int
	// Poll is how often unfinished deletions are looked for (default 5s;
	// a request through the admin API starts at once).
	Poll time.Duration
	// Settle is how long a deletion waits, after the user's memberships
	// went, for inbox entries that fanout batches committed before still
	// publish (default 15s: above the fanout's publish timeout, 10s).
	Settle time.Duration
}

// DefaultOptions returns the defaults of the settings with flags
// (internal/config registers them) and of the rest.
func DefaultOptions() Options {
	return Options{
		Layout:        streams.DefaultLayout,
		DeviceForget:  90 * 24 * time.Hour,
		DeviceReap:    time.Hour,
		RejectHorizon: 30 * 24 * time.Hour,
		Every:         time.Hour,
		Batch:         1000,
		Poll:          5 * time.Second,
		Settle:        15 * time.Second,
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.Layout == (streams.Layout{}) {
		o.Layout = d.Layout
	}
	if o.Batch <= 0 {
		o.Batch = d.Batch
	}
	if o.Poll <= 0 {
		o.Poll = d.Poll
	}
	if o.Settle <= 0 {
		o.Settle = d.Settle
	}
	return o
}

// Holds answers which conversations are under a legal hold (the store:
// store.HeldConversations).
type Holds interface {
	HeldConversations(ctx context.Context, convIDs []int64) (map[int64]bool, error)
}

// Lifecycle runs the deletion jobs and housekeeping of one syncer.
type Lifecycle struct {
	opts  Options
	log   *zap.Logger
	nc    *nats.Conn
	js    jetstream.JetStream
	st    *store.Store
	holds Holds
	m     metrics

	poke  chan struct{} // a deletion was asked for
	hooks atomic.Pointer[testHooks]
	wg    sync.WaitGroup
}

// testHooks let tests stop a job between steps as a crash would, and
// shorten its waits (export_test.go).
type testHooks struct {
	checkpoint func(ctx context.Context, uid int64, step string) error
	settle     time.Duration
	batch      int
}

// New returns the lifecycle jobs of a syncer; Run runs them.
func New(opts Options, log *zap.Logger, nc *nats.Conn, js jetstream.JetStream, st *store.Store, reg prometheus.Registerer) *Lifecycle {
	return &Lifecycle{
		opts: opts.withDefaults(), log: log, nc: nc, js: js, st: st, holds: st,
		m:    newMetrics(reg),
		poke: make(chan struct{}, 1),
	}
}

// Run runs the deletion jobs and, every Options.Every, housekeeping,
// until ctx ends.
func (l *Lifecycle) Run(ctx context.Context) error {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		l.runHousekeeping(ctx)
	}()
	l.runDeletions(ctx)
	l.wg.Wait()
	return ctx.Err()
}

func (l *Lifecycle) batch() int {
	if h := l.hooks.Load(); h != nil && h.batch > 0 {
		return h.batch
	}
	return l.opts.Batch
}

func (l *Lifecycle) settle() time.Duration {
	if h := l.hooks.Load(); h != nil && h.settle > 0 {
		return h.settle
	}
	return l.opts.Settle
}

// heldConversations returns which of convIDs are held: all of them under
// the installation's hold, else those Holds reports.
func (l *Lifecycle) heldConversations(ctx context.Context, convIDs []int64) (map[int64]bool, error) {
	if l.opts.LegalHold {
		all := make(map[int64]bool, len(convIDs))
		for _, c := range convIDs {
			all[c] = true
		}
		return all, nil
	}
	return l.holds.HeldConversations(ctx, convIDs)
}

// checkpoint runs the test hook, if any, before a step or a batch.
func (l *Lifecycle) checkpoint(ctx context.Context, uid int64, step string) error {
	if h := l.hooks.Load(); h != nil && h.checkpoint != nil {
		return h.checkpoint(ctx, uid, step)
	}
	return nil
}

type metrics struct {
	deletionsDone   prometheus.Counter
	deletionErrors  prometheus.Counter
	deletionRunning prometheus.Gauge
	deleted         *prometheus.CounterVec // what user deletions removed, by what

	hkRows      *prometheus.CounterVec // rows housekeeping removed, by table
	hkBytes     *prometheus.CounterVec // bytes those rows held, by table
	hkConsumers *prometheus.CounterVec // consumers housekeeping deleted, by reason
	hkErrors    prometheus.Counter
	hkLastRun   prometheus.Gauge
	hkDuration  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) metrics {
	f := promauto.With(reg)
	return metrics{
		deletionsDone: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_user_deletions_done_total",
			Help: "User deletions that completed."}),
		deletionErrors: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_user_deletion_errors_total",
			Help: "Steps of user deletions that failed (the job retries them)."}),
		deletionRunning: f.NewGauge(prometheus.GaugeOpts{Name: "inboxd_user_deletion_running",
			Help: "1 while this syncer runs a user deletion."}),
		deleted: f.NewCounterVec(prometheus.CounterOpts{Name: "inboxd_user_deletion_removed_total",
			Help: "What user deletions removed: inbox_entries, archive_rows, cursors, consumers, conversations (memberships), bodies, rejects."}, []string{"what"}),
		hkRows: f.NewCounterVec(prometheus.CounterOpts{Name: "inboxd_housekeeping_rows_removed_total",
			Help: "Rows housekeeping removed, by table (device_cursor: devices unseen longer than --device-forget; send_reject: past --reject-horizon)."}, []string{"table"}),
		hkBytes: f.NewCounterVec(prometheus.CounterOpts{Name: "inboxd_housekeeping_bytes_freed_total",
			Help: "Bytes the rows housekeeping removed held (row data, without index entries), by table."}, []string{"table"}),
		hkConsumers: f.NewCounterVec(prometheus.CounterOpts{Name: "inboxd_housekeeping_consumers_removed_total",
			Help: "Device consumers housekeeping deleted: forgotten (device unseen longer than --device-forget), unreaped (unseen longer than --device-reap and still there)."}, []string{"reason"}),
		hkErrors: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_housekeeping_errors_total",
			Help: "Housekeeping passes that failed part way (the next pass goes on)."}),
		hkLastRun: f.NewGauge(prometheus.GaugeOpts{Name: "inboxd_housekeeping_last_run_timestamp_seconds",
			Help: "When the last housekeeping pass ended (Unix time)."}),
		hkDuration: f.NewGauge(prometheus.GaugeOpts{Name: "inboxd_housekeeping_last_run_seconds",
			Help: "How long the last housekeeping pass took."}),
	}
}
