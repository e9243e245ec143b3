package gateway

import (
	"crypto/tls"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"golang.org/x/time/rate"

	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/wire"
)

// Options configures a gateway. Zero values take the documented defaults.
type Options struct {
	// Backfill, when set, is the NATS connection for device consumers
	// (backfill reads); live entries, sends and results stay on the main
	// one, so a storm of backfill deliveries does not queue them.
	Backfill *nats.Conn
	// ID names this gateway process in result subjects and logs (default: random).
	ID string
	// WSAddr serves WebSocket upgrades on WSPath (default 127.0.0.1:7070, "/ws").
	WSAddr string
	WSPath string
	// TCPAddr serves raw TCP with length-prefixed frames (default 127.0.0.1:7071).
	TCPAddr string
	Layout  streams.Layout
	// Heartbeat is advertised in welcome; a client silent for 3 heartbeats
	// is closed (default 20s: below common NAT idle timeouts of 30-60s).
	Heartbeat time.Duration
	// HelloTimeout bounds the wait for the first frame (default 10s).
	HelloTimeout time.Duration
	// WriteTimeout bounds one socket write (default 10s).
	WriteTimeout time.Duration
	// MaxFrame is the largest client frame accepted (default 64 KiB).
	MaxFrame int
	// OutQueue bounds the frames queued for one connection (default 1024).
	OutQueue int
	// MaxInflightSends bounds one connection's sends awaiting a result (default 256).
	MaxInflightSends int
	// SendTimeout is how long a send may await its result before the client
	// is told to retry (default 30s).
	SendTimeout time.Duration
	// TailScan is the most stream entries (everyone's) a device's consumer
	// may have to scan to catch up: when the partition holds more between
	// the device's position and its head, and the Postgres archive holds
	// the range, the range is read from the archive first (default 1000:
	// the consumer also costs a state file write per delivery, which made
	// a 300 × 200 login storm 3–5 × slower at 10000; docs/design.md).
	TailScan int
	// DeviceIdleReap is the InactiveThreshold of device consumers (default
	// 72h); a reaped consumer is recreated from the mirrored cursor.
	DeviceIdleReap time.Duration
	// UserBackfillRate and UserBackfillBurst are the per-user token bucket
	// of backfill messages on this gateway (defaults 20000/s, 2000); each
	// device kind has its own rate below that (profiles.go).
	UserBackfillRate  rate.Limit
	UserBackfillBurst int
	// BodyCacheEntries bounds the shared message body cache (default 100000).
	BodyCacheEntries int
	// PullRate limits conversation pulls per user (default 5/s, burst 5).
	PullRate rate.Limit
	// OfflineThreshold: a device with more pending entries than this gets
	// the summary and the newest page first (default 5000).
	OfflineThreshold int
	// NewDeviceWindow and NewDeviceMax bound what a device's first login
	// replays: entries of the last NewDeviceWindow (default 7 days), at most
	// NewDeviceMax of them (default 1000).
	NewDeviceWindow time.Duration
	NewDeviceMax    int
	// MaxConnsPerUser bounds one user's connections on this gateway
	// (default 16); more are refused with LIMIT_EXCEEDED.
	MaxConnsPerUser int
	// SendRate limits sends per user (default 50/s, burst twice that);
	// beyond it sends are answered FAILED RATE_LIMITED and retried.
	SendRate rate.Limit
	// TLS, when set, serves both listeners over TLS (wss://, tls://).
	TLS *tls.Config
	// DeviceSeenEvery refreshes connected devices' last_seen_at (default 30s).
	DeviceSeenEvery time.Duration
	// AckTimeout is how long a batch may await confirmation on a live
	// connection before the session takes back everything unconfirmed and
	// hands it over again from the cursor (default 3 heartbeats: a slow
	// phone is not taken for a dead one, a stuck one does not hold its
	// messages until it reconnects).
	AckTimeout time.Duration
}

func (o *Options) setDefaults() {
	if o.ID == "" {
		o.ID = nuid.Next()
	}
	if o.WSAddr == "" {
		o.WSAddr = "127.0.0.1:7070"
	}
	if o.WSPath == "" {
		o.WSPath = "/ws"
	}
	if o.TCPAddr == "" {
		o.TCPAddr = "127.0.0.1:7071"
	}
	if o.Layout == (streams.Layout{}) {
		o.Layout = streams.DefaultLayout
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 20 * time.Second
	}
	if o.HelloTimeout <= 0 {
		o.HelloTimeout = 10 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.MaxFrame <= 0 {
		o.MaxFrame = wire.DefaultMaxFrame
	}
	if o.OutQueue <= 0 {
		o.OutQueue = 1024
	}
	if o.MaxInflightSends <= 0 {
		o.MaxInflightSends = 256
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = 30 * time.Second
	}
	if o.TailScan <= 0 {
		o.TailScan = 1000
	}
	if o.DeviceIdleReap <= 0 {
		o.DeviceIdleReap = 72 * time.Hour
	}
	if o.UserBackfillRate <= 0 {
		o.UserBackfillRate = 20000
	}
	if o.UserBackfillBurst <= 0 {
		o.UserBackfillBurst = 2000
	}
	if o.BodyCacheEntries <= 0 {
		o.BodyCacheEntries = 100000
	}
	if o.PullRate <= 0 {
		o.PullRate = 5
	}
	if o.OfflineThreshold <= 0 {
		o.OfflineThreshold = 5000
	}
	if o.NewDeviceWindow <= 0 {
		o.NewDeviceWindow = 7 * 24 * time.Hour
	}
	if o.NewDeviceMax <= 0 {
		o.NewDeviceMax = 1000
	}
	if o.MaxConnsPerUser <= 0 {
		o.MaxConnsPerUser = 16
	}
	if o.SendRate <= 0 {
		o.SendRate = 50
	}
	if o.DeviceSeenEvery <= 0 {
		o.DeviceSeenEvery = 30 * time.Second
	}
	// Ack timeout (session helper, issue 12): after Heartbeat's default.
	if o.AckTimeout <= 0 {
		o.AckTimeout = 3 * o.Heartbeat
	}
}
