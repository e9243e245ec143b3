package fanout

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	sends        *prometheus.CounterVec // by outcome
	entries      prometheus.Counter
	batchErrors  prometheus.Counter
	markRetries  prometheus.Counter
	batchSeconds prometheus.Histogram
	stage        [numStages]prometheus.Observer // a batch's steps, in series
	malformed    prometheus.Counter
	// consumersRecreated counts fanout consumers found lost and created again.
	consumersRecreated prometheus.Counter
	// earlierPublished counts messages another fanout had committed and
	// not published, published first by a later send's batch.
	earlierPublished prometheus.Counter
	// inboxBehind counts batches held back because an INBOX stream was
	// below what Postgres records of it (fence.go).
	inboxBehind prometheus.Counter
	// idsSalted counts batches whose entries were given new dedupe ids
	// after a stream refused one as in process.
	idsSalted prometheus.Counter

	// Delivery lag per SEND partition (lag.go).
	pending *prometheus.GaugeVec
	stalled *prometheus.GaugeVec
	oldest  prometheus.Gauge
}

// A batch's steps (inboxd_fanout_stage_seconds{stage}), in the order they
// run: together they are inboxd_fanout_batch_seconds but for decoding and
// the answers.
const (
	stageCommit  = iota // the Postgres transaction: rows locked, decided, committed
	stagePublish        // the inbox entries published, acknowledged and announced live
	stageMark           // fanned_out marked in Postgres (STORED waits for it; live does not)
	numStages
)

var stageNames = [numStages]string{"commit", "publish", "mark"}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	stages := f.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "inboxd_fanout_stage_seconds",
		Help:    "Time of one step of a batch: commit (the Postgres transaction), publish (inbox entries acknowledged and announced live), mark (fanned_out in Postgres, before STORED).",
		Buckets: prometheus.ExponentialBuckets(0.000125, 2, 16),
	}, []string{"stage"})
	m := &metrics{
		sends: f.NewCounterVec(prometheus.CounterOpts{
			Name: "inboxd_fanout_sends_total",
			Help: "Sends processed by outcome: stored (new), repeated (already stored), rejected.",
		}, []string{"outcome"}),
		inboxBehind: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_fanout_inbox_behind_total",
			Help: "Batch attempts held back because an INBOX stream came back below what Postgres records of it (a power cut, a restored backup) and the syncer had not fenced it yet.",
		}),
		idsSalted: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_fanout_dedupe_ids_salted_total",
			Help: "Batches published again under new dedupe ids because a clustered INBOX stream refused one as in process (a proposal its leader lost, after a power cut of every node): their entries may come twice, and the devices drop the repeat.",
		}),
		entries: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_fanout_inbox_entries_total",
			Help: "Inbox entries published and acknowledged by JetStream.",
		}),
		batchErrors: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_fanout_batch_errors_total",
			Help: "Batches that failed and were retried.",
		}),
		markRetries: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_fanout_mark_retries_total",
			Help: "fanned_out marks that failed and were tried again (the batch's sends wait for them).",
		}),
		batchSeconds: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "inboxd_fanout_batch_seconds",
			Help:    "Time from fetch to STORED for one batch.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		malformed: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_fanout_malformed_total",
			Help: "SEND messages that could not be decoded (acknowledged and dropped with a log line).",
		}),
		consumersRecreated: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_fanout_consumers_recreated_total",
			Help: "SEND partitions whose fanout consumer was lost (its state is in memory: a NATS restart loses it) or stopped answering, and was created again; nothing is lost with one.",
		}),
		earlierPublished: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_fanout_earlier_published_total",
			Help: "Messages another fanout had committed and not published yet (stuck on NATS, or dead), published by the batch of a later send of their conversation before its own: inbox entries stay in conv_seq order.",
		}),
		pending: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "inboxd_fanout_pending_sends",
			Help: "Sends of the SEND partition not STORED yet: its fanout consumer's pending and unacknowledged messages (every 5 s).",
		}, []string{"partition"}),
		stalled: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "inboxd_fanout_stalled_seconds",
			Help: "While the SEND partition has sends pending: seconds since its fanout consumer's last ack (0 when none is pending; every 5 s).",
		}, []string{"partition"}),
		oldest: f.NewGauge(prometheus.GaugeOpts{
			Name: "inboxd_fanout_oldest_pending_seconds",
			Help: "Age of the oldest send not STORED yet, of any SEND partition (0 when SEND is empty; every 5 s).",
		}),
	}
	for i, name := range stageNames {
		m.stage[i] = stages.WithLabelValues(name)
	}
	return m
}

// since observes the time from start to now for stage and returns now.
func (m *metrics) since(stage int, start time.Time) time.Time {
	now := time.Now()
	m.stage[stage].Observe(now.Sub(start).Seconds())
	return now
}
