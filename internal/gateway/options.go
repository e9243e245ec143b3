package gateway

import (
	"cmp"
	"crypto/tls"
	"io/fs"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"golang.org/x/time/rate"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/wire"
)

// Options configures a gateway. Zero values take the documented defaults.
type Options struct {
	// Backfill, when set, is the NATS connection for device consumers
	// (backfill reads); live entries, sends and results stay on the main
	// one, so a storm of backfill deliveries does not queue them.
	Backfill *nats.Conn
	// SendStore, when set, is the Postgres pool of the send path: the
	// member counts a send is charged by, the poll for STORED results and
	// the conversation kinds of read_sync and receipt events. The store New is given then
	// serves only catch-up work (logins, summaries, pages, bodies, pulls,
	// read marks, cursors), so a login storm that holds every one of its
	// connections does not queue a send (docs/design.md, "Postgres
	// pools").
	SendStore *store.Store
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
	// NoPark keeps a reader goroutine and a read buffer on every
	// connection instead of parking idle ones on the gateway's epoll
	// instance (poller_linux.go). For tests and measurements.
	NoPark bool
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
	// 1h); a reaped consumer is recreated from the mirrored cursor. Short,
	// so that only recently active devices hold a consumer in NATS (about
	// 31 KB each): an offline device costs its device_cursor row, and its
	// next login a consumer create (under a millisecond;
	// BenchmarkDeviceConsumerStorage in internal/streams).
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

	// Limits that a reconnect cannot reset (limits.go). Every per-user
	// bucket lives on the gateway and outlives the user's sessions.

	// SendEntryRate limits the inbox entries a user's sends may write per
	// second (default 2000): a send costs its conversation's member count,
	// so a sender in a big group is limited by what it writes, not by the
	// number of its sends. 2000 keeps every conversation of up to 40
	// members within reach of SendRate, and one user at about 1.5% of the
	// inbox publish rate this machine measured (~130k entries/s).
	SendEntryRate rate.Limit
	// SendEntryBurst is the entry bucket's size (default the larger of
	// 2 × SendEntryRate and store.MaxMembers, so that a send to the largest
	// group passes from a full bucket: once per 10 s at the default rate).
	// A send to a conversation with more members than the burst costs the
	// whole burst.
	SendEntryBurst int
	// MaxDevicesPerUser bounds the devices a user may have (default 32).
	// A device counts while its device_cursor row was seen within
	// DeviceIdleReap (its consumer still exists); a new device id over the
	// cap is refused at hello with LIMIT_EXCEEDED before its consumer or
	// row is created. A device that counts always gets in.
	MaxDevicesPerUser int
	// RequestRate limits summary_request, read, read_count, ack_range and
	// refresh frames per user (default 10/s, burst twice that); over it
	// the frame is answered RATE_LIMITED and not acted on.
	RequestRate rate.Limit
	// PreauthConns and PreauthConnsPerIP bound the connections that have
	// not finished hello, on this gateway and from one remote IP (defaults
	// 4096 and 1024); a connection over either is closed at once (counted).
	// 4096 leaves most of a process's 20,000 files to logged-in
	// connections while idle sockets are held; 1024 per IP is a quarter of
	// that, so one address cannot take the whole gateway cap, while a NAT
	// site reconnecting at once after a gateway restart is not throttled to
	// a trickle: during a login storm a hello holds its slot for seconds,
	// not milliseconds (measured: 256 per IP made 3,000 logins from one
	// address retry 8 times each and doubled their first-page p99).
	PreauthConns      int
	PreauthConnsPerIP int

	// Login admission (admission.go): LoginConcurrency is the ceiling of
	// the limit on logins in progress on this gateway (default 512; the
	// live-first steering lowers the limit, to 16 at least, or this if
	// lower, while live messages are late).
	// LoginRate is the logins per second this gateway admits, burst a
	// tenth of a second of it (default 20000, twice the target of 10,000
	// handshakes/s on a 2-core machine: it does not bind an honest wave
	// there, and bounds the token checks and summary reads a reconnect
	// flood makes a bigger machine start; rate.Inf: no limit). A login
	// over either budget is refused with a fatal UNAVAILABLE and
	// retry_after_ms (docs/protocol.md, "Login admission").
	LoginConcurrency int
	LoginRate        rate.Limit

	// LiveDelayTarget is how much later than their baseline live messages
	// may reach this gateway before the live-first steering holds back
	// catch-up page reads and logins (livesteer.go; default 20ms, the
	// tick mean; negative: no steering, the full budget always).
	LiveDelayTarget time.Duration

	// RevocationSweep is how often the gateway reads the revocations
	// recorded since its last read, for announcements it missed (default
	// 30s; also at once after a NATS reconnect).
	RevocationSweep time.Duration

	// Web client (webapp.go). Web, when set, is the client's
	// files, served at /app/ on the WebSocket listener (nil: /app is a
	// 404 like any path but WSPath). DevToken, when set, answers POST
	// /app/dev/token with a token for any uid and device: set it only
	// when tokens are signed with the development secret, which anyone
	// can sign with anyway.
	Web      fs.FS
	DevToken func(uid int64, device string) (token string, exp time.Time, err error)
}

// DefaultOptions returns the default of every option that has one: the one
// place they are written (setDefaults, internal/config and the flags' help
// take them from here). ID, Backfill, SendStore and TLS have none.
func DefaultOptions() Options {
	return Options{
		WSAddr:            "127.0.0.1:7070",
		WSPath:            "/ws",
		TCPAddr:           "127.0.0.1:7071",
		Layout:            streams.DefaultLayout,
		Heartbeat:         20 * time.Second,
		HelloTimeout:      10 * time.Second,
		WriteTimeout:      10 * time.Second,
		MaxFrame:          wire.DefaultMaxFrame,
		OutQueue:          1024,
		MaxInflightSends:  256,
		SendTimeout:       30 * time.Second,
		TailScan:          1000,
		DeviceIdleReap:    time.Hour,
		UserBackfillRate:  20000,
		UserBackfillBurst: 2000,
		BodyCacheEntries:  100000,
		PullRate:          5,
		OfflineThreshold:  5000,
		NewDeviceWindow:   7 * 24 * time.Hour,
		NewDeviceMax:      1000,
		MaxConnsPerUser:   16,
		SendRate:          50,
		DeviceSeenEvery:   30 * time.Second,
		AckTimeout:        3 * 20 * time.Second, // 3 × Heartbeat; setDefaults derives it from the heartbeat in use
		SendEntryRate:     2000,
		SendEntryBurst:    store.MaxMembers, // max(2 × SendEntryRate, store.MaxMembers); setDefaults derives it from the rate in use
		MaxDevicesPerUser: 32,
		RequestRate:       10,
		PreauthConns:      4096,
		PreauthConnsPerIP: 1024,
		RevocationSweep:   30 * time.Second,
		LoginConcurrency:  512,
		LoginRate:         20000,
		LiveDelayTarget:   20 * time.Millisecond,
	}
}

// setDefaults gives every zero (or negative) option its default.
func (o *Options) setDefaults() {
	d := DefaultOptions()
	if o.ID == "" {
		o.ID = nuid.Next()
	}
	orDefault(&o.WSAddr, d.WSAddr)
	orDefault(&o.WSPath, d.WSPath)
	orDefault(&o.TCPAddr, d.TCPAddr)
	if o.Layout == (streams.Layout{}) {
		o.Layout = d.Layout
	}
	orDefault(&o.Heartbeat, d.Heartbeat)
	orDefault(&o.HelloTimeout, d.HelloTimeout)
	orDefault(&o.WriteTimeout, d.WriteTimeout)
	orDefault(&o.MaxFrame, d.MaxFrame)
	orDefault(&o.OutQueue, d.OutQueue)
	orDefault(&o.MaxInflightSends, d.MaxInflightSends)
	orDefault(&o.SendTimeout, d.SendTimeout)
	orDefault(&o.TailScan, d.TailScan)
	orDefault(&o.DeviceIdleReap, d.DeviceIdleReap)
	orDefault(&o.UserBackfillRate, d.UserBackfillRate)
	orDefault(&o.UserBackfillBurst, d.UserBackfillBurst)
	orDefault(&o.BodyCacheEntries, d.BodyCacheEntries)
	orDefault(&o.PullRate, d.PullRate)
	orDefault(&o.OfflineThreshold, d.OfflineThreshold)
	orDefault(&o.NewDeviceWindow, d.NewDeviceWindow)
	orDefault(&o.NewDeviceMax, d.NewDeviceMax)
	orDefault(&o.MaxConnsPerUser, d.MaxConnsPerUser)
	orDefault(&o.SendRate, d.SendRate)
	orDefault(&o.DeviceSeenEvery, d.DeviceSeenEvery)
	orDefault(&o.RevocationSweep, d.RevocationSweep)
	// The ack timeout follows the heartbeat actually in use (3 of them,
	// like the read deadline), not the default heartbeat's.
	if o.AckTimeout <= 0 {
		o.AckTimeout = 3 * o.Heartbeat
	}
	orDefault(&o.SendEntryRate, d.SendEntryRate)
	// The entry burst follows the rate in use, and never drops below the
	// largest group: a send to it must be able to pass.
	if o.SendEntryBurst <= 0 {
		o.SendEntryBurst = max(2*int(min(o.SendEntryRate, 1<<30)), store.MaxMembers)
	}
	orDefault(&o.MaxDevicesPerUser, d.MaxDevicesPerUser)
	orDefault(&o.RequestRate, d.RequestRate)
	orDefault(&o.PreauthConns, d.PreauthConns)
	orDefault(&o.PreauthConnsPerIP, d.PreauthConnsPerIP)
	orDefault(&o.LoginConcurrency, d.LoginConcurrency)
	orDefault(&o.LoginRate, d.LoginRate)
	if o.LiveDelayTarget == 0 {
		o.LiveDelayTarget = d.LiveDelayTarget
	}
}

// orDefault sets *v to d when *v is zero or below (for a string: empty).
func orDefault[T cmp.Ordered](v *T, d T) {
	var zero T
	if *v <= zero {
		*v = d
	}
}
