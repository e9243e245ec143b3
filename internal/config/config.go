// Package config is the one configuration of every inboxd binary: flags with
// documented defaults, each also set by its environment variable
// (INBOXD_<FLAG>) or a line of the --config file (Parse), so a deployment
// can use any of them. A malformed value is an error, and a secret is never
// printed.
package config

import (
	"flag"
	"fmt"
	"time"

	"github.com/inboxd/inboxd/internal/archive"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/fanout"
	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/lifecycle"
	"github.com/inboxd/inboxd/internal/ops"
	"github.com/inboxd/inboxd/internal/push"
	"github.com/inboxd/inboxd/internal/push/bridge"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// Config holds every setting; each binary registers the ones it uses.
type Config struct {
	NATSURL      string
	NATSUser     string // default: the binary's role
	NATSPassword string // default: natsauth.Password(user)
	DatabaseURL  string
	HTTPAddr     string
	LogLevel     string
	ConfigFile   string // --config: read by Parse, unused after

	// Embedded NATS (inboxd all-in-one, inboxd --nats-only).
	DataDir    string
	NATSListen string

	// Gateway.
	WSAddr      string
	TCPAddr     string
	Heartbeat   time.Duration
	AckTimeout  time.Duration // 0: 3 heartbeats
	TokenSecret string
	DeviceReap  time.Duration
	TailScan    int

	TokenEdKeyFile  string
	TLSCert, TLSKey string
	MaxConnsPerUser int
	DeviceSeenEvery time.Duration
	SendRate        float64

	NewDeviceWindow  time.Duration
	NewDeviceMax     int
	OfflineThreshold int
	PullRate         float64

	// Fanout.
	NodeID    int
	BatchSize int

	Layout streams.Layout

	// Syncer: how long inbox entries stay in the INBOX streams (recorded
	// on the streams, changed by inboxctl streams set).
	HotWindow time.Duration

	// Gateway limits that a reconnect cannot reset.
	SendEntryRate     float64
	MaxDevicesPerUser int
	RequestRate       float64
	PreauthConns      int
	PreauthConnsPerIP int

	// Login admission (internal/gateway/admission.go):
	// the ceiling of the adaptive limit on logins in progress, the login
	// latency it steers to (0: automatic) and logins per second (0: no
	// rate limit), all per gateway.
	LoginConcurrency int
	LoginRate        float64
	// LiveDelayTarget: the live-first steering's target (0: off).
	LiveDelayTarget time.Duration

	// NATS login and TLS of the services (least privilege in
	// NATS): a credentials file instead of user/password, the CA that
	// verifies the server, a client certificate.
	NATSCreds         string
	NATSCA            string
	NATSCert, NATSKey string

	// Ops endpoints: the debug listener, off by default,
	// and how long a stopping process stays up unready.
	DebugHTTPAddr string
	DrainDelay    time.Duration

	// Keys and exposure (internal/node/secure.go, internal/auth).
	Dev           bool          // allow development secrets on reachable addresses
	TokenKeysFile string        // JSON key set, each key with a kid
	TokenIssuer   string        // when set, a token's iss must equal it
	TokenMaxTTL   time.Duration // longest exp − iat accepted

	// Retention in Postgres (the syncer): how long
	// message bodies and archived inbox entries are kept (0: forever), the
	// width of the time ranges they are removed by (0: calendar months),
	// and the installation-wide legal hold.
	Retention      time.Duration
	PartitionWidth time.Duration
	LegalHold      bool

	// Syncer housekeeping: how long a device may stay
	// unseen before its cursor row is forgotten, how long a refused
	// send's answer is kept, and how often housekeeping runs.
	DeviceForget      time.Duration
	RejectHorizon     time.Duration
	HousekeepingEvery time.Duration

	// Early cleanup (the syncer; internal/archive):
	// rounds every CleanupEvery (0: off) of CleanupBatch users, at most
	// CleanupRate purges a second; the new-device window (NewDeviceWindow,
	// NewDeviceMax, shared with the gateway) is kept as it was
	// CleanupMargin ago.
	CleanupEvery  time.Duration
	CleanupRate   float64
	CleanupBatch  int
	CleanupMargin time.Duration

	// NATS cluster: the embedded server's name, its cluster
	// (route) listen address and the other nodes' route URLs; the replica
	// count of the streams (the syncer records it on them).
	NodeName      string
	ClusterListen string
	Routes        string
	Replicas      int
	// Web client (the gateway): serve it at /app/ on the
	// WebSocket listener.
	Web bool
	// Mutual TLS on the routes (internal/natsembed): this node's
	// certificate and key, and the CA its peers' certificates are
	// verified by; all three or none.
	ClusterTLSCert, ClusterTLSKey, ClusterTLSCA string
	// Offline push (the syncer, internal/push): off by
	// default. A message entry is decided PushAfter after it was stored,
	// a user gets at most one event per PushCollapse, and an event
	// carries the text only with PushBody.
	Push         bool
	PushAfter    time.Duration
	PushCollapse time.Duration
	PushBody     bool

	// The push bridge (cmd/pushbridge, internal/push/bridge): the relay's
	// webhook and how deliveries are retried.
	WebhookURL         string
	WebhookSecret      string
	WebhookTimeout     time.Duration
	WebhookAttempts    int
	RetryMin, RetryMax time.Duration
	WebhookConcurrency int

	// Postgres pools per role class (internal/node,
	// docs/design.md "Postgres pools"): the most connections of the send
	// path's pool (the gateway's sends and the fanout's writes), of the
	// gateway's catch-up reads, and of the syncer's background jobs.
	PGSendConns       int
	PGCatchupConns    int
	PGBackgroundConns int
}

// Defaults returns the configuration `make run` uses. The gateway's and the
// fanout's settings take their packages' defaults (gateway.DefaultOptions,
// fanout.DefaultOptions), so each default is written once; the rest belong
// to no library and are written here.
func Defaults() Config {
	gw, fo, lc, cl := gateway.DefaultOptions(), fanout.DefaultOptions(), lifecycle.DefaultOptions(), archive.DefaultCleanupOptions()
	pu, br := push.DefaultOptions(), bridge.DefaultOptions()
	return Config{
		NATSURL:     "nats://" + natsAddr,
		DatabaseURL: store.DefaultURL,
		HTTPAddr:    "127.0.0.1:7072",
		LogLevel:    "info",
		DataDir:     "./data",
		NATSListen:  natsAddr,
		TokenSecret: auth.DevSecret,
		Layout:      streams.DefaultLayout,
		HotWindow:   streams.DefaultHotWindow,
		Replicas:    1,
		DrainDelay:  ops.DefaultDrainDelay,

		WSAddr:           gw.WSAddr,
		TCPAddr:          gw.TCPAddr,
		Heartbeat:        gw.Heartbeat,
		DeviceReap:       gw.DeviceIdleReap,
		TailScan:         gw.TailScan,
		NewDeviceWindow:  gw.NewDeviceWindow,
		NewDeviceMax:     gw.NewDeviceMax,
		OfflineThreshold: gw.OfflineThreshold,
		PullRate:         float64(gw.PullRate),
		MaxConnsPerUser:  gw.MaxConnsPerUser,
		DeviceSeenEvery:  gw.DeviceSeenEvery,
		SendRate:         float64(gw.SendRate),

		NodeID:    fanout.AutoNodeID,
		BatchSize: fo.BatchSize,

		SendEntryRate:     float64(gw.SendEntryRate),
		MaxDevicesPerUser: gw.MaxDevicesPerUser,
		RequestRate:       float64(gw.RequestRate),
		PreauthConns:      gw.PreauthConns,
		PreauthConnsPerIP: gw.PreauthConnsPerIP,
		LoginConcurrency:  gw.LoginConcurrency,
		LoginRate:         float64(gw.LoginRate),
		LiveDelayTarget:   gw.LiveDelayTarget,
		TokenMaxTTL:       auth.DefaultMaxTTL,

		DeviceForget:      lc.DeviceForget,
		RejectHorizon:     lc.RejectHorizon,
		HousekeepingEvery: lc.Every,

		CleanupEvery:  cl.Every,
		CleanupRate:   cl.Rate,
		CleanupBatch:  cl.Batch,
		CleanupMargin: cl.Margin,

		Web: true,

		PushAfter:    pu.After,
		PushCollapse: pu.Collapse,

		WebhookTimeout:     br.Timeout,
		WebhookAttempts:    br.MaxAttempts,
		RetryMin:           br.RetryMin,
		RetryMax:           br.RetryMax,
		WebhookConcurrency: br.Concurrency,

		// 4 + 4 + 2 per all-in-one process (and the retention job's 2):
		// 36 for a 3-node cluster on one box, well under Postgres'
		// default max_connections of 100 (docs/operations.md, "Postgres
		// pools").
		PGSendConns:       4,
		PGCatchupConns:    4,
		PGBackgroundConns: 2,
	}
}

// DefaultsFor is Defaults for a binary with roles: a fanout or a syncer on
// its own serves its ops HTTP on a port of its own (7073, 7074), so that a
// split deployment on one box needs no flags.
func DefaultsFor(roles Role) Config {
	c := Defaults()
	switch roles {
	case RoleFanout:
		c.HTTPAddr = "127.0.0.1:7073"
	case RoleSyncer:
		c.HTTPAddr = "127.0.0.1:7074"
	case RolePushBridge:
		c.HTTPAddr = "127.0.0.1:7075"
	}
	return c
}

// MinCleanupMargin is the shortest --cleanup-margin: above the gateways'
// one-second flush of device cursors to Postgres, which writes a new
// device's row, with a second to spare.
const MinCleanupMargin = 2 * time.Second

// natsAddr is the embedded NATS server's client address and the one the
// services dial.
const natsAddr = "127.0.0.1:4222"

// Role selects which flags a binary registers.
type Role int

// Roles.
const (
	RoleGateway Role = 1 << iota
	RoleFanout
	RoleSyncer
	RoleEmbeddedNATS
	// RolePushBridge is cmd/pushbridge alone (never with another role):
	// the NATS login, the ops HTTP and the webhook flags.
	RolePushBridge

	// RoleAllInOne is cmd/inboxd: every service and the embedded NATS
	// server in one process.
	RoleAllInOne = RoleGateway | RoleFanout | RoleSyncer | RoleEmbeddedNATS
)

// Register adds the flags of roles to fs, with c's values as defaults.
// Parse then sets them from the command line, the environment (every flag
// has its variable: EnvVars) and the --config file.
func (c *Config) Register(fs *flag.FlagSet, roles Role) {
	fs.StringVar(&c.ConfigFile, "config", c.ConfigFile, "file of \"flag value\" lines (# comments); the command line and the environment override it")
	fs.StringVar(&c.HTTPAddr, "http", c.HTTPAddr, "ops HTTP address: /livez, /readyz, /healthz, /metrics (env INBOXD_HTTP)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error (env INBOXD_LOG_LEVEL)")
	fs.DurationVar(&c.DrainDelay, "drain-delay", c.DrainDelay, "after SIGTERM/SIGINT, serve this long with /readyz 503 before closing connections; a second signal cuts it short (env INBOXD_DRAIN_DELAY)")
	if roles != RolePushBridge { // the bridge has neither Postgres nor the streams' layout
		fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "Postgres URL (env INBOXD_DATABASE_URL or DATABASE_URL)")
		fs.IntVar(&c.Layout.InboxPartitions, "inbox-partitions", c.Layout.InboxPartitions, "INBOX_<p> partitions, fixed at install (env INBOXD_INBOX_PARTITIONS)")
		fs.IntVar(&c.Layout.SendPartitions, "send-partitions", c.Layout.SendPartitions, "SEND partitions, fixed at install (env INBOXD_SEND_PARTITIONS)")
		fs.StringVar(&c.DebugHTTPAddr, "debug-http", c.DebugHTTPAddr, "debug HTTP address, loopback only: /debug/pprof, /debug/sessions; unauthenticated (env INBOXD_DEBUG_HTTP; default off)")
		fs.BoolVar(&c.Dev, "dev", c.Dev, "allow the development secrets and passwords on addresses reachable beyond loopback, for a trial; logged loudly (env INBOXD_DEV)")
	}
	if roles&RoleEmbeddedNATS != 0 {
		fs.StringVar(&c.DataDir, "data", c.DataDir, "data directory (JetStream file store under DIR/jetstream)")
		fs.StringVar(&c.NATSListen, "nats-listen", c.NATSListen, "client address of the embedded NATS server (the nats CLI connects here)")
		fs.StringVar(&c.NodeName, "name", c.NodeName, "server name of the embedded NATS server, unique in a cluster (env INBOXD_NAME; default inboxd)")
		fs.StringVar(&c.ClusterListen, "cluster-listen", c.ClusterListen, "host:port the embedded NATS server accepts cluster routes on: forms a NATS cluster with --routes (env INBOXD_CLUSTER_LISTEN; default off)")
		fs.StringVar(&c.Routes, "routes", c.Routes, "the other nodes' cluster URLs, comma separated: nats://host:port,... (env INBOXD_ROUTES)")
		fs.StringVar(&c.ClusterTLSCert, "cluster-tls-cert", c.ClusterTLSCert, "PEM certificate of this node on the cluster routes (mutual TLS with --cluster-tls-key and --cluster-tls-ca; env INBOXD_CLUSTER_TLS_CERT)")
		fs.StringVar(&c.ClusterTLSKey, "cluster-tls-key", c.ClusterTLSKey, "PEM key of --cluster-tls-cert (env INBOXD_CLUSTER_TLS_KEY)")
		fs.StringVar(&c.ClusterTLSCA, "cluster-tls-ca", c.ClusterTLSCA, "PEM CA certificates the other nodes' route certificates must be signed by (env INBOXD_CLUSTER_TLS_CA)")
	} else {
		fs.StringVar(&c.NATSURL, "nats", c.NATSURL, "NATS server URL(s), comma separated (env INBOXD_NATS or NATS_URL)")
		fs.StringVar(&c.NATSUser, "nats-user", c.NATSUser, "NATS user (env INBOXD_NATS_USER or NATS_USER; default: the service's role)")
		fs.StringVar(&c.NATSPassword, "nats-password", c.NATSPassword, "NATS password (env INBOXD_NATS_PASSWORD or NATS_PASSWORD; default $INBOXD_NATS_PASSWORD_<ROLE> or the development password)")
		fs.StringVar(&c.NATSCreds, "nats-creds", c.NATSCreds, "NATS credentials file (user JWT and nkey seed, decentralized auth); when set, no user or password is sent (env INBOXD_NATS_CREDS)")
		fs.StringVar(&c.NATSCA, "nats-ca", c.NATSCA, "PEM CA certificates that verify the NATS server: TLS to NATS (env INBOXD_NATS_CA)")
		fs.StringVar(&c.NATSCert, "nats-cert", c.NATSCert, "PEM client certificate for a NATS server that verifies clients (env INBOXD_NATS_CERT)")
		fs.StringVar(&c.NATSKey, "nats-key", c.NATSKey, "PEM private key of --nats-cert (env INBOXD_NATS_KEY)")
	}
	if roles&(RoleGateway|RoleSyncer) != 0 {
		// The gateways set it on the consumers; the syncer's housekeeping
		// deletes a consumer left over after it.
		fs.DurationVar(&c.DeviceReap, "device-reap", c.DeviceReap, "remove a device's cursor consumer after this long unused (recreated from the Postgres mirror at its next login)")
	}
	if roles&RoleSyncer != 0 {
		fs.DurationVar(&c.DeviceForget, "device-forget", c.DeviceForget, "forget a device unseen this long: its cursor row and consumer go, it logs in again as a new device (0: never)")
		fs.DurationVar(&c.RejectHorizon, "reject-horizon", c.RejectHorizon, "keep the answer to a refused send this long for its retries (send_reject rows; 0: forever)")
		fs.DurationVar(&c.HousekeepingEvery, "housekeeping-every", c.HousekeepingEvery, "how often the syncer removes forgotten devices, left-over consumers and expired send rejects (0: never)")
	}
	if roles&RoleGateway != 0 {
		fs.StringVar(&c.WSAddr, "ws", c.WSAddr, "WebSocket listen address (path /ws)")
		fs.StringVar(&c.TCPAddr, "tcp", c.TCPAddr, "raw TCP listen address (length-prefixed frames)")
		fs.DurationVar(&c.Heartbeat, "heartbeat", c.Heartbeat, "heartbeat advertised to clients; 3 silent heartbeats close a connection")
		fs.DurationVar(&c.AckTimeout, "ack-timeout", c.AckTimeout, "a batch unconfirmed this long on a live connection is handed over again from the cursor (0: 3 heartbeats)")
		fs.StringVar(&c.TokenSecret, "token-secret", c.TokenSecret, "HS256 secret of client tokens (env INBOXD_TOKEN_SECRET); the default is the development secret")
		fs.IntVar(&c.TailScan, "tail-scan", c.TailScan, "catch-up reads from the Postgres archive when the consumer would scan more stream entries than this")
		fs.IntVar(&c.OfflineThreshold, "offline-threshold", c.OfflineThreshold, "a device with more pending entries gets the summary and the newest page first")
		fs.Float64Var(&c.PullRate, "pull-rate", c.PullRate, "conversation pulls per second per user")
		fs.StringVar(&c.TokenEdKeyFile, "token-ed25519-key", c.TokenEdKeyFile, "PEM file of an Ed25519 public key: EdDSA client tokens are accepted too (with --token-secret \"\" only them)")
		fs.StringVar(&c.TLSCert, "tls-cert", c.TLSCert, "PEM certificate: serve WebSocket (wss) and TCP over TLS")
		fs.StringVar(&c.TLSKey, "tls-key", c.TLSKey, "PEM private key of --tls-cert")
		fs.IntVar(&c.MaxConnsPerUser, "max-conns-per-user", c.MaxConnsPerUser, "connections one user may hold on a gateway")
		fs.DurationVar(&c.DeviceSeenEvery, "device-seen-every", c.DeviceSeenEvery, "how often a connected device's last_seen_at is refreshed (inboxctl audit)")
		fs.Float64Var(&c.SendRate, "send-rate", c.SendRate, "sends per second per user (burst twice that)")
		fs.Float64Var(&c.SendEntryRate, "send-entry-rate", c.SendEntryRate, "inbox entries per second per user that sends may write: a send costs its conversation's member count; burst the larger of twice that and the largest group (20000)")
		fs.IntVar(&c.MaxDevicesPerUser, "max-devices-per-user", c.MaxDevicesPerUser, "devices a user may have (those used within --device-reap); a new one beyond is refused at hello")
		fs.Float64Var(&c.RequestRate, "request-rate", c.RequestRate, "summary_request, read, read_count, ack_range and refresh frames per second per user, burst twice that")
		fs.IntVar(&c.PreauthConns, "preauth-conns", c.PreauthConns, "connections that have not finished hello, per gateway; more are closed at once")
		fs.IntVar(&c.PreauthConnsPerIP, "preauth-conns-per-ip", c.PreauthConnsPerIP, "connections that have not finished hello, per remote IP (IPv6: per /64); more are closed at once")
		fs.IntVar(&c.LoginConcurrency, "login-concurrency", c.LoginConcurrency, "logins in progress per gateway at most (the live-first steering lowers it to 16 while live messages are late); a login without a slot waits up to 5s, then is refused UNAVAILABLE with retry_after_ms")
		fs.DurationVar(&c.LiveDelayTarget, "live-delay-target", c.LiveDelayTarget, "how much later than their baseline live messages may arrive before the gateway holds back catch-up page reads and logins (0: never)")
		fs.Float64Var(&c.LoginRate, "login-rate", c.LoginRate, "logins per second per gateway, burst a tenth of a second of it; beyond, refused UNAVAILABLE with retry_after_ms (0: no rate limit)")
		fs.StringVar(&c.TokenKeysFile, "token-keys", c.TokenKeysFile, "JSON key set of client token keys, each with a kid, for rotation (docs/protocol.md) (env INBOXD_TOKEN_KEYS)")
		fs.StringVar(&c.TokenIssuer, "token-issuer", c.TokenIssuer, "when set, a client token's iss must equal it (env INBOXD_TOKEN_ISSUER)")
		fs.DurationVar(&c.TokenMaxTTL, "token-max-ttl", c.TokenMaxTTL, "longest client token lifetime (exp - iat) accepted; tokens without iat are refused (env INBOXD_TOKEN_MAX_TTL)")
		fs.BoolVar(&c.Web, "web", c.Web, "serve the web client at /app/ on the --ws listener (env INBOXD_WEB); with the development token secret it also issues development tokens")
	}
	if roles&RoleSyncer != 0 {
		fs.IntVar(&c.Replicas, "replicas", c.Replicas, "replicas of the SEND and INBOX streams: 1, or 3 on a NATS cluster; recorded on the streams, changed with `inboxctl streams set --replicas` (env INBOXD_REPLICAS)")
		fs.DurationVar(&c.HotWindow, "hot-window", c.HotWindow, "inbox entries stay in the INBOX streams this long, then are read from the Postgres archive; only archived entries are trimmed. Recorded on the streams: change it with `inboxctl streams set --hot-window` (env INBOXD_HOT_WINDOW)")
	}
	if roles&RoleSyncer != 0 {
		fs.DurationVar(&c.Retention, "retention", c.Retention, "remove message bodies and archived inbox entries older than this, by whole time ranges (0: keep forever)")
		fs.DurationVar(&c.PartitionWidth, "partition-width", c.PartitionWidth, "width of the time ranges (Postgres partitions) retention removes (0: calendar months)")
		fs.BoolVar(&c.LegalHold, "legal-hold", c.LegalHold, "installation-wide legal hold: retention removes nothing (per conversation: inboxctl conv hold)")
	}
	if roles&(RoleGateway|RoleSyncer) != 0 {
		// The gateway replays the window to a new device; the syncer's
		// early cleanup keeps it in the streams: both read the same flags.
		fs.DurationVar(&c.NewDeviceWindow, "new-device-window", c.NewDeviceWindow, "a device's first login replays the inbox entries of this last period, at most --new-device-max of them (the syncer's early cleanup keeps them)")
		fs.IntVar(&c.NewDeviceMax, "new-device-max", c.NewDeviceMax, "most inbox entries a device's first login replays from --new-device-window (older history: conversation pulls)")
	}
	if roles&RoleSyncer != 0 {
		fs.DurationVar(&c.CleanupEvery, "cleanup-every", c.CleanupEvery, "early cleanup: a round every this long purges from the INBOX streams what every device of a user confirmed, the archive holds and the new-device window does not need (0: off)")
		fs.IntVar(&c.CleanupBatch, "cleanup-batch", c.CleanupBatch, "users one early cleanup round looks at")
		fs.Float64Var(&c.CleanupRate, "cleanup-rate", c.CleanupRate, "early cleanup purges per second at most (each holds its partition's stream lock for a moment)")
		fs.DurationVar(&c.CleanupMargin, "cleanup-margin", c.CleanupMargin, "early cleanup keeps the new-device window as it was this long ago (a new device's first cursor write, clock skew)")
	}
	if roles&RoleSyncer != 0 {
		fs.BoolVar(&c.Push, "push", c.Push, "offline push: publish a push event on push.<uid> (stream PUSH, read by cmd/pushbridge) for a message no device of its recipient confirmed within --push-after (env INBOXD_PUSH)")
		fs.DurationVar(&c.PushAfter, "push-after", c.PushAfter, "decide a message's push this long after it was stored: pushed unless a device confirmed it or the user read it by then (env INBOXD_PUSH_AFTER)")
		fs.DurationVar(&c.PushCollapse, "push-collapse", c.PushCollapse, "at most one push event per user this often; messages inside the window are folded into the next event (0: no collapse) (env INBOXD_PUSH_COLLAPSE)")
		fs.BoolVar(&c.PushBody, "push-body", c.PushBody, "put the message text (at most 1 KB) into push events; off: the relay sees no text (env INBOXD_PUSH_BODY)")
	}
	if roles&RolePushBridge != 0 {
		fs.StringVar(&c.WebhookURL, "webhook-url", c.WebhookURL, "the relay's webhook: each push event is POSTed to it as JSON (env INBOXD_WEBHOOK_URL; required)")
		fs.StringVar(&c.WebhookSecret, "webhook-secret", c.WebhookSecret, "HMAC-SHA256 key of the Inboxd-Signature header of every request (env INBOXD_WEBHOOK_SECRET; default: unsigned)")
		fs.DurationVar(&c.WebhookTimeout, "webhook-timeout", c.WebhookTimeout, "bound of one webhook request (env INBOXD_WEBHOOK_TIMEOUT)")
		fs.IntVar(&c.WebhookAttempts, "max-attempts", c.WebhookAttempts, "an event the webhook did not accept (2xx) after this many attempts is terminated and logged (env INBOXD_MAX_ATTEMPTS)")
		fs.DurationVar(&c.RetryMin, "retry-min", c.RetryMin, "first retry delay cap; the cap doubles per attempt, the delay is random below it (env INBOXD_RETRY_MIN)")
		fs.DurationVar(&c.RetryMax, "retry-max", c.RetryMax, "largest retry delay (env INBOXD_RETRY_MAX)")
		fs.IntVar(&c.WebhookConcurrency, "concurrency", c.WebhookConcurrency, "webhook requests in flight at most (env INBOXD_CONCURRENCY)")
	}
	if roles&(RoleGateway|RoleFanout) != 0 {
		fs.IntVar(&c.PGSendConns, "pg-send-conns", c.PGSendConns, "most Postgres connections of the send path's pool: the gateway's sends, the fanout's writes (env INBOXD_PG_SEND_CONNS)")
	}
	if roles&RoleGateway != 0 {
		fs.IntVar(&c.PGCatchupConns, "pg-catchup-conns", c.PGCatchupConns, "most Postgres connections of the gateway's catch-up pool: logins, summaries, pages, bodies, pulls, cursors (env INBOXD_PG_CATCHUP_CONNS)")
	}
	if roles&RoleSyncer != 0 {
		fs.IntVar(&c.PGBackgroundConns, "pg-background-conns", c.PGBackgroundConns, "most Postgres connections of the syncer's background pool: archiver, trimmer, cleanup, lifecycle, push, admin (env INBOXD_PG_BACKGROUND_CONNS)")
	}
	if roles&RoleFanout != 0 {
		fs.IntVar(&c.NodeID, "node-id", c.NodeID, "msg_id node id 0..1023; -1: leased automatically, distinct per running fanout (a fixed one is leased too: a second fanout with it refuses to start) (env INBOXD_NODE_ID)")
		fs.IntVar(&c.BatchSize, "batch", c.BatchSize, "sends per fanout batch (1..512)")
	}
}

// ValidateSyncer checks what only the syncer's settings must agree on (a
// gateway has --device-reap and no --device-forget).
func (c *Config) ValidateSyncer() error {
	if c.Push {
		if err := c.PushOptions().Validate(); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	if c.DeviceForget > 0 && c.DeviceForget <= c.DeviceReap {
		return fmt.Errorf("config: --device-forget %s must exceed --device-reap %s (a device is forgotten after its consumer was reaped), or be 0 (never)", c.DeviceForget, c.DeviceReap)
	}
	return nil
}

// PushOptions is the pusher's part of the configuration.
func (c *Config) PushOptions() push.Options {
	o := push.DefaultOptions()
	o.Layout, o.After, o.Collapse, o.Body = c.Layout, c.PushAfter, c.PushCollapse, c.PushBody
	return o
}

// BridgeOptions is the push bridge's part of the configuration.
func (c *Config) BridgeOptions() bridge.Options {
	return bridge.Options{URL: c.WebhookURL, Secret: c.WebhookSecret, Timeout: c.WebhookTimeout, MaxAttempts: c.WebhookAttempts,
		RetryMin: c.RetryMin, RetryMax: c.RetryMax, Concurrency: c.WebhookConcurrency}
}

// Validate checks values flags cannot.
func (c *Config) Validate() error {
	if err := c.Layout.Validate(); err != nil {
		return err
	}
	if err := streams.ValidateHotWindow(c.HotWindow); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := streams.ValidateReplicas(c.Replicas); err != nil {
		return fmt.Errorf("config: --replicas (env INBOXD_REPLICAS): %w", err)
	}
	if c.BatchSize < 1 || c.BatchSize > 512 {
		return fmt.Errorf("config: batch %d out of range 1..512", c.BatchSize)
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		return fmt.Errorf("config: --tls-cert and --tls-key go together")
	}
	if (c.NATSCert == "") != (c.NATSKey == "") {
		return fmt.Errorf("config: --nats-cert and --nats-key go together")
	}
	if c.AckTimeout < 0 {
		return fmt.Errorf("config: ack-timeout %s is negative (0 means 3 heartbeats)", c.AckTimeout)
	}
	if c.LoginConcurrency < 1 || c.LiveDelayTarget < 0 || c.LoginRate < 0 {
		return fmt.Errorf("config: --login-concurrency %d, --live-delay-target %s, --login-rate %g: want the concurrency at least 1, the target and the rate not negative (0: no steering, no rate limit)",
			c.LoginConcurrency, c.LiveDelayTarget, c.LoginRate)
	}
	if c.TokenMaxTTL <= 0 {
		return fmt.Errorf("config: --token-max-ttl %s must be positive", c.TokenMaxTTL)
	}
	if c.Retention < 0 || c.PartitionWidth < 0 {
		return fmt.Errorf("config: retention %s and partition-width %s must not be negative (0: forever, calendar months)", c.Retention, c.PartitionWidth)
	}
	if c.PartitionWidth > 0 && c.PartitionWidth < time.Second {
		return fmt.Errorf("config: partition-width %s is below 1s", c.PartitionWidth)
	}
	if c.DeviceForget < 0 || c.RejectHorizon < 0 || c.HousekeepingEvery < 0 {
		return fmt.Errorf("config: --device-forget %s, --reject-horizon %s and --housekeeping-every %s must not be negative (0 turns each off)",
			c.DeviceForget, c.RejectHorizon, c.HousekeepingEvery)
	}
	if c.CleanupEvery < 0 || c.CleanupRate <= 0 || c.CleanupBatch < 1 {
		return fmt.Errorf("config: cleanup-every %s (0: off), cleanup-rate %g, cleanup-batch %d: want every not negative, rate and batch positive",
			c.CleanupEvery, c.CleanupRate, c.CleanupBatch)
	}
	if c.CleanupMargin < MinCleanupMargin {
		return fmt.Errorf("config: cleanup-margin %s is below %s: a new device's cursor row is written up to a second after its login, and the margin must cover that", c.CleanupMargin, MinCleanupMargin)
	}
	if c.PGSendConns < 1 || c.PGCatchupConns < 1 || c.PGBackgroundConns < 1 {
		return fmt.Errorf("config: --pg-send-conns %d, --pg-catchup-conns %d and --pg-background-conns %d must be at least 1",
			c.PGSendConns, c.PGCatchupConns, c.PGBackgroundConns)
	}
	if c.Heartbeat < time.Second {
		return fmt.Errorf("config: heartbeat %s is below 1s", c.Heartbeat)
	}
	return nil
}
