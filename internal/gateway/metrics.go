package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

type metrics struct {
	connections       prometheus.Gauge
	parked            prometheus.Gauge
	handshakes        prometheus.Counter
	authFailures      prometheus.Counter
	upgradeFailures   prometheus.Counter
	framesIn          prometheus.Counter
	errors            *prometheus.CounterVec
	overflows         prometheus.Counter
	timeouts          prometheus.Counter
	helloTimeouts     prometheus.Counter
	heartbeatTimeouts prometheus.Counter
	sendResults       *prometheus.CounterVec
	duplicateSends    prometheus.Counter
	sendsWithoutID    prometheus.Counter // sends published again without a Nats-Msg-Id (send.go)

	replaced           prometheus.Counter
	staleKicks         prometheus.Counter
	consumersRecreated prometheus.Counter
	epochEnded         prometheus.Counter // sessions ended because their INBOX stream was recreated (epoch.go)
	backfillMessages   prometheus.Counter
	liveMessages       prometheus.Counter
	liveDeferred       prometheus.Counter
	badAcks            prometheus.Counter
	pages              *prometheus.CounterVec
	pageRead           *prometheus.HistogramVec // by source, as pages
	coverFallbacks     prometheus.Counter       // covering reads that found an entry the live lane did not send (pages.go)
	consumerRequests   *prometheus.CounterVec   // JetStream requests on device consumers, by op (consumer.go)
	events             *prometheus.CounterVec
	eventFailures      *prometheus.CounterVec
	eventsGivenUp      *prometheus.CounterVec
	ackRanges          prometheus.Counter
	orphans            prometheus.Counter
	trimmedUnderRead   prometheus.Counter
	ackTimeouts        prometheus.Counter
	refreshes          prometheus.Counter // token refreshes accepted (tokenlife.go)

	// Limits (limits.go).
	rateLimited    *prometheus.CounterVec
	userLimits     prometheus.Gauge
	devicesRefused prometheus.Counter
	preauthConns   prometheus.Gauge
	preauthRefused *prometheus.CounterVec

	// Login admission (admission.go).
	loginsAdmitted prometheus.Counter
	loginsRefused  *prometheus.CounterVec
	loginLimit     prometheus.Gauge

	// Live-first steering (livesteer.go).
	liveDelay  prometheus.Histogram
	steerLevel prometheus.Gauge
	pageSlots  prometheus.Gauge

	// Latencies an operator of a cluster watches (docs/operations.md).
	sendStored prometheus.Histogram
	login      prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		connections: f.NewGauge(prometheus.GaugeOpts{
			Name: "inboxd_gateway_connections", Help: "Open client connections.",
		}),
		parked: f.NewGauge(prometheus.GaugeOpts{
			Name: "inboxd_gateway_parked_connections", Help: "Connections idle on the gateway's epoll instance: no reader goroutine, no read buffer.",
		}),
		handshakes: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_handshakes_total", Help: "Successful hellos.",
		}),
		authFailures: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_auth_failures_total", Help: "Hellos refused for their token.",
		}),
		refreshes: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_token_refreshes_total", Help: "Token refreshes accepted on open connections.",
		}),
		upgradeFailures: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_ws_upgrade_failures_total", Help: "WebSocket handshakes refused.",
		}),
		framesIn: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_frames_in_total", Help: "Client frames received after hello.",
		}),
		errors: f.NewCounterVec(prometheus.CounterOpts{
			Name: "inboxd_gateway_errors_total", Help: "Error frames sent to clients, by code.",
		}, []string{"code"}),
		overflows: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_queue_overflow_disconnects_total",
			Help: "Connections closed because their outbound queue was full.",
		}),
		timeouts: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_timeouts_total", Help: "Connections closed by a read or write deadline.",
		}),
		helloTimeouts: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_hello_timeouts_total", Help: "Connections closed because no hello came within the hello timeout.",
		}),
		heartbeatTimeouts: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_heartbeat_timeouts_total",
			Help: "Logged-in connections closed because the peer was silent for 3 heartbeats (half-open detection).",
		}),
		sendResults: f.NewCounterVec(prometheus.CounterOpts{
			Name: "inboxd_gateway_send_results_total", Help: "Send results relayed to clients, by status.",
		}, []string{"status"}),
		duplicateSends: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_duplicate_sends_total", Help: "Sends JetStream reported as duplicates (client retries).",
		}),
		sendsWithoutID: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_sends_without_dedupe_id_total",
			Help: "Sends published again without their Nats-Msg-Id because a clustered SEND refused it as in process (a proposal lost with every node's power); Postgres recognises their repeats.",
		}),
		staleKicks: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_stale_login_kicks_total", Help: "Login announcements of a device from a login older than the session here (ignored; this session announced itself again).",
		}),
		replaced: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_sessions_replaced_total", Help: "Sessions closed because their device logged in again.",
		}),
		epochEnded: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_gateway_sessions_ended_by_stream_epoch_total",
			Help: "Sessions ended (UNAVAILABLE, the client reconnects) because their INBOX stream was recreated under them."}),
		consumersRecreated: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_consumers_recreated_total", Help: "Device consumers recreated from the mirrored cursor (reaped or lost).",
		}),
		backfillMessages: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_backfill_messages_total", Help: "Messages sent on the backfill lane.",
		}),
		liveMessages: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_live_messages_total", Help: "Messages sent on the live lane.",
		}),
		liveDeferred: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_live_deferred_total",
			Help: "Live entries left to the backfill because the device had too many unconfirmed messages.",
		}),
		pages: f.NewCounterVec(prometheus.CounterOpts{
			Name: "inboxd_gateway_backfill_pages_total",
			Help: "Backfill pages read, by source: archive (Postgres index), tail (JetStream consumer, with bodies) or cover (a tail read of entries the live lane sent already: no page slot, no budget, no bodies).",
		}, []string{"source"}),
		pageRead: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "inboxd_gateway_backfill_page_read_seconds",
			Help:    "Time to read one backfill page, by source as inboxd_gateway_backfill_pages_total (the read and the bodies; not the wait for the budget or a page slot).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"source"}),
		coverFallbacks: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_cover_fallbacks_total",
			Help: "Covering tail reads that found an entry the live lane had not sent (dropped, deferred, or written without a live announcement): read as a normal tail page, with the bodies.",
		}),
		consumerRequests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "inboxd_gateway_consumer_requests_total",
			Help: "JetStream requests the gateway makes on device consumers, by op: lookup, create, delete, reset, reset_to, info, fetch, ack, stream_info, direct_get.",
		}, []string{"op"}),
		events: f.NewCounterVec(prometheus.CounterOpts{
			Name: "inboxd_gateway_events_total", Help: "Per-user events written to inboxes, by type.",
		}, []string{"type"}),
		eventFailures: f.NewCounterVec(prometheus.CounterOpts{
			Name: "inboxd_gateway_event_publish_failures_total",
			Help: "Failed attempts to publish a per-user event (read_sync, receipts), by type; each is retried with backoff.",
		}, []string{"type"}),
		eventsGivenUp: f.NewCounterVec(prometheus.CounterOpts{
			Name: "inboxd_gateway_events_given_up_total",
			Help: "Per-user events given up after their retries (a later read or confirmation supersedes them), by type.",
		}, []string{"type"}),
		orphans: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_orphaned_deliveries_total",
			Help: "Fetches dropped because the consumer had delivered entries to a pull request nobody read; the consumer is put back at the cursor.",
		}),
		trimmedUnderRead: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_tail_reads_trimmed_total",
			Help: "Tail fetches dropped because the syncer trimmed part of their stretch from the stream meanwhile; it is read from the archive.",
		}),
		ackRanges: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_ack_ranges_total", Help: "Explicit range confirmations (entries the client chose not to fetch).",
		}),
		ackTimeouts: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_ack_timeouts_total",
			Help: "Times a live connection left a batch unconfirmed past the ack timeout; its unconfirmed entries were handed over again from the cursor.",
		}),
		badAcks: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_bad_acks_total", Help: "Acks naming batches or messages not awaiting confirmation.",
		}),
		rateLimited: f.NewCounterVec(prometheus.CounterOpts{
			Name: "inboxd_gateway_rate_limited_total",
			Help: "Frames refused RATE_LIMITED by a per-user bucket, by bucket: sends, send_entries, pulls, requests.",
		}, []string{"limit"}),
		userLimits: f.NewGauge(prometheus.GaugeOpts{
			Name: "inboxd_gateway_user_limits",
			Help: "Users whose rate buckets this gateway holds (connected, or active within the last seconds: kept until full again).",
		}),
		devicesRefused: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_devices_refused_total", Help: "Hellos of a new device refused by --max-devices-per-user.",
		}),
		preauthConns: f.NewGauge(prometheus.GaugeOpts{
			Name: "inboxd_gateway_preauth_connections", Help: "Connections that have not finished hello.",
		}),
		preauthRefused: f.NewCounterVec(prometheus.CounterOpts{
			Name: "inboxd_gateway_preauth_refused_total",
			Help: "Connections closed at accept because too many had not finished hello, by cap: total (--preauth-conns) or per_ip (--preauth-conns-per-ip).",
		}, []string{"cap"}),
		loginsAdmitted: f.NewCounter(prometheus.CounterOpts{
			Name: "inboxd_gateway_logins_admitted_total", Help: "Logins admitted by the login budget (docs/operations.md, \"Login admission\").",
		}),
		loginsRefused: f.NewCounterVec(prometheus.CounterOpts{
			Name: "inboxd_gateway_logins_refused_total",
			Help: "Logins refused UNAVAILABLE with retry_after_ms, by budget: concurrency (no slot within 5 s) or rate (--login-rate).",
		}, []string{"budget"}),
		loginLimit: f.NewGauge(prometheus.GaugeOpts{
			Name: "inboxd_gateway_login_limit", Help: "The adaptive limit on logins in progress on this gateway (at most --login-concurrency).",
		}),
		liveDelay: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "inboxd_gateway_live_delay_seconds",
			Help:    "Time from a live message's msg_id (minted by the fanout inside the transaction that stores the message) to its live announcement reaching this gateway; the live-first steering holds it within --live-delay-target of its baseline.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		steerLevel: f.NewGauge(prometheus.GaugeOpts{
			Name: "inboxd_gateway_catchup_level",
			Help: "The live-first steering's catch-up level, 0 to 1: 1 while live messages arrive on time, lower while they are late (docs/operations.md, \"Live first\").",
		}),
		pageSlots: f.NewGauge(prometheus.GaugeOpts{
			Name: "inboxd_gateway_page_slots", Help: "Backfill page reads allowed at once on this gateway now (4 to 16, set by the catch-up level).",
		}),
		sendStored: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "inboxd_gateway_send_stored_seconds",
			Help:    "Time from a send's arrival at the gateway to its STORED result (through SEND, the fanout, Postgres and the inboxes).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		login: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "inboxd_gateway_login_seconds",
			Help:    "Time from a hello's arrival to its welcome (token check, device consumer, summary).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
	}
	// Every label value from the start: a rate or a "no new" check needs
	// the zero.
	for _, src := range []string{pageArchive, pageTail, pageCover} {
		m.pages.WithLabelValues(src)
		m.pageRead.WithLabelValues(src)
	}
	for _, op := range consumerOps {
		m.consumerRequests.WithLabelValues(op)
	}
	return m
}

// The sources of backfill pages (the source label).
const (
	pageArchive = "archive" // the Postgres archive index, with the bodies
	pageTail    = "tail"    // the device consumer, bodies from the cache or Postgres
	pageCover   = "cover"   // the device consumer, entries the live lane sent already: no bodies
)

// The JetStream requests on device consumers (the op label).
const (
	opLookup     = "lookup"      // consumer info by name (open, lost)
	opCreate     = "create"      // create, or create-or-update when recreated
	opDelete     = "delete"      // an offline consumer dropped
	opReset      = "reset"       // ResetConsumer (unacknowledged deliveries back at once)
	opResetTo    = "reset_to"    // ResetConsumerToSequence
	opInfo       = "info"        // consumer info for NumPending
	opFetch      = "fetch"       // a pull request
	opAck        = "ack"         // an ack (AckPolicy all: up to a delivery)
	opStreamInfo = "stream_info" // the partition's first entry
	opDirectGet  = "direct_get"  // the inbox's newest entry
)

var consumerOps = []string{opLookup, opCreate, opDelete, opReset, opResetTo, opInfo, opFetch, opAck, opStreamInfo, opDirectGet}
