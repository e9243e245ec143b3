package ops

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"runtime/debug"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// Version is the release of the binary, set at build time with
// -ldflags "-X github.com/inboxd/inboxd/internal/ops.Version=v1.2.3";
// without it, the main module's version from the build info ("(devel)"
// for a build from a checkout).
var Version = ""

// BuildInfo returns inboxd_build_info: always 1, labelled with the
// version, the Go release and the VCS revision (+"-dirty" for a modified
// tree; "unknown" when built without VCS stamping, as -buildvcs=false does).
func BuildInfo() prometheus.Collector {
	version, revision := Version, "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if version == "" {
			version = bi.Main.Version
		}
		dirty := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && revision != "unknown" {
			revision += "-dirty"
		}
	}
	if version == "" {
		version = "unknown"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "inboxd_build_info",
		Help:        "Always 1; the labels say which build runs: version, go_version, revision.",
		ConstLabels: prometheus.Labels{"version": version, "go_version": runtime.Version(), "revision": revision},
	})
	g.Set(1)
	return g
}

// natsConns reports the state of a process's NATS connections at scrape
// time: the client library keeps the state and the reconnect count, so
// nothing has to hook its callbacks.
type natsConns struct {
	conns                               func() map[string]*nats.Conn
	connected, reconnecting, reconnects *prometheus.Desc
}

// NATSConnections returns the collector of the NATS connections conns
// lists by name (main, backfill, archiver): inboxd_nats_connected (1 while
// connected), inboxd_nats_reconnecting (1 while it tries to reconnect) and
// inboxd_nats_reconnects_total.
func NATSConnections(conns func() map[string]*nats.Conn) prometheus.Collector {
	l := []string{"conn"}
	return &natsConns{conns: conns,
		connected:    prometheus.NewDesc("inboxd_nats_connected", "1 while the NATS connection is connected, else 0.", l, nil),
		reconnecting: prometheus.NewDesc("inboxd_nats_reconnecting", "1 while the NATS connection is lost and being re-established, else 0.", l, nil),
		reconnects:   prometheus.NewDesc("inboxd_nats_reconnects_total", "Times the NATS connection was re-established after a loss (to any node of the cluster).", l, nil),
	}
}

func (c *natsConns) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.connected
	ch <- c.reconnecting
	ch <- c.reconnects
}

func (c *natsConns) Collect(ch chan<- prometheus.Metric) {
	for name, nc := range c.conns() {
		if nc == nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(c.connected, prometheus.GaugeValue, b2f(nc.IsConnected()), name)
		ch <- prometheus.MustNewConstMetric(c.reconnecting, prometheus.GaugeValue, b2f(nc.IsReconnecting()), name)
		ch <- prometheus.MustNewConstMetric(c.reconnects, prometheus.CounterValue, float64(nc.Stats().Reconnects), name)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// pgPool reports a pgx pool's statistics at scrape time.
type pgPool struct {
	pools                                          func() map[string]*pgxpool.Pool
	acquired, idle, total, max, constructing       *prometheus.Desc
	acquires, emptyAcquires, canceled, acquireWait *prometheus.Desc
}

// PostgresPools returns the collector of the Postgres pools pools lists by
// name: connections acquired, idle, total and the maximum (gauges), and
// acquires, acquires that had to wait for a connection, canceled acquires
// and the time spent acquiring (counters; rate(wait)/rate(acquires) is the
// mean wait).
func PostgresPools(pools func() map[string]*pgxpool.Pool) prometheus.Collector {
	l := []string{"pool"}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("inboxd_postgres_pool_"+name, help, l, nil)
	}
	return &pgPool{pools: pools,
		acquired:      d("acquired_conns", "Connections in use."),
		idle:          d("idle_conns", "Connections idle in the pool."),
		total:         d("total_conns", "Connections open (acquired, idle and being opened)."),
		max:           d("max_conns", "Most connections the pool opens."),
		constructing:  d("constructing_conns", "Connections being opened."),
		acquires:      d("acquires_total", "Connections acquired from the pool."),
		emptyAcquires: d("empty_acquires_total", "Acquires that waited because no connection was idle (the pool is too small or Postgres slow)."),
		canceled:      d("canceled_acquires_total", "Acquires given up (their context ended) before a connection came."),
		acquireWait:   d("acquire_wait_seconds_total", "Time spent acquiring connections."),
	}
}

func (c *pgPool) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.total, c.max, c.constructing, c.acquires, c.emptyAcquires, c.canceled, c.acquireWait} {
		ch <- d
	}
}

func (c *pgPool) Collect(ch chan<- prometheus.Metric) {
	for name, p := range c.pools() {
		if p == nil {
			continue
		}
		s := p.Stat()
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, name)
		}
		n := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, name)
		}
		g(c.acquired, float64(s.AcquiredConns()))
		g(c.idle, float64(s.IdleConns()))
		g(c.total, float64(s.TotalConns()))
		g(c.max, float64(s.MaxConns()))
		g(c.constructing, float64(s.ConstructingConns()))
		n(c.acquires, float64(s.AcquireCount()))
		n(c.emptyAcquires, float64(s.EmptyAcquireCount()))
		n(c.canceled, float64(s.CanceledAcquireCount()))
		n(c.acquireWait, s.AcquireDuration().Seconds())
	}
}

// jsAPI counts a process's JetStream API calls.
type jsAPI struct {
	requests, responses prometheus.Counter
	errors              *prometheus.CounterVec
}

// JetStreamTrace returns the client trace (jetstream.WithClientTrace) that
// counts the JetStream API calls of a process in reg:
// inboxd_jetstream_api_requests_total, inboxd_jetstream_api_responses_total
// (the difference: calls without an answer, timeouts and no responders,
// which the leader elections of a cluster cause) and
// inboxd_jetstream_api_errors_total{kind} (answers carrying an error, by
// JetStream error code: stream_not_found, cluster_unavailable, …). The
// roles of an all-in-one process share one set.
func JetStreamTrace(reg prometheus.Registerer) *jetstream.ClientTrace {
	m := &jsAPI{
		requests: shared(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "inboxd_jetstream_api_requests_total",
			Help: "JetStream API requests sent (stream and consumer calls; not publishes or pulls)."})),
		responses: shared(reg, prometheus.NewCounter(prometheus.CounterOpts{Name: "inboxd_jetstream_api_responses_total",
			Help: "JetStream API responses received; requests minus responses went unanswered (timeout, no responders)."})),
		errors: shared(reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "inboxd_jetstream_api_errors_total",
			Help: "JetStream API responses that carried an error, by kind (the JetStream error code's name, or code_<n>)."}, []string{"kind"})),
	}
	return &jetstream.ClientTrace{
		RequestSent: func(string, []byte) { m.requests.Inc() },
		ResponseReceived: func(_ string, data []byte, _ nats.Header) {
			m.responses.Inc()
			if kind := jsErrorKind(data); kind != "" {
				m.errors.WithLabelValues(kind).Inc()
			}
		},
	}
}

// shared registers c in reg, or returns the collector registered there
// before under the same name (the gateway, fanout and syncer of one
// process each ask for the trace).
func shared[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(C); ok {
				return old
			}
		}
		panic(err)
	}
	return c
}

// jsErrorKinds names the JetStream error codes an operator of a cluster
// tells apart (nats-server's jetstream_errors_generated.go); others are
// code_<n>.
var jsErrorKinds = map[int]string{
	10002: "account_resources_exceeded",
	10005: "cluster_no_peers",
	10008: "cluster_unavailable",
	10009: "not_leader",
	10012: "consumer_create",
	10013: "consumer_name_exists",
	10014: "consumer_not_found",
	10023: "insufficient_resources",
	10026: "max_consumers",
	10028: "memory_resources_exceeded",
	10037: "no_message_found",
	10039: "jetstream_not_enabled",
	10047: "storage_resources_exceeded",
	10058: "stream_name_exists",
	10059: "stream_not_found",
	10069: "stream_update",
	10074: "replicas_not_supported",
	10118: "stream_offline",
	10119: "consumer_offline",
	10148: "consumer_already_exists",
}

// jsErrorKind returns the kind of an API response's error, "" for none.
func jsErrorKind(data []byte) string {
	// Most answers are no error: they are not decoded (a consumer's info
	// with the whole config was 0.5 % of the all-in-one's CPU under live
	// traffic). An answer with an error has the member "error".
	if !bytes.Contains(data, []byte(`"error"`)) {
		return ""
	}
	var r struct {
		Error *struct {
			Code    int `json:"code"`
			ErrCode int `json:"err_code"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &r) != nil || r.Error == nil {
		return ""
	}
	if k, ok := jsErrorKinds[r.Error.ErrCode]; ok {
		return k
	}
	if r.Error.ErrCode == 0 {
		return "status_" + strconv.Itoa(r.Error.Code)
	}
	return "code_" + strconv.Itoa(r.Error.ErrCode)
}
