package fanout

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	sends        *prometheus.CounterVec // by outcome
	entries      prometheus.Counter
	batchErrors  prometheus.Counter
	markRetries  prometheus.Counter
	batchSeconds prometheus.Histogram
	malformed    prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	return &metrics{
		sends: f.NewCounterVec(prometheus.CounterOpts{
			Name: "inboxd_fanout_sends_total",
			Help: "Sends processed by outcome: stored (new), repeated (already stored), rejected.",
		}, []string{"outcome"}),
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
	}
}
