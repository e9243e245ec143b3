package gateway

import (
	"context"
	"net"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/inboxd/inboxd/internal/store"
)

// Per-user limits that a reconnect cannot reset.
//
// A user's token buckets are created at its first use on this gateway and
// outlive its sessions: a disconnect does not drop them, and a bucket set
// is forgotten only once every bucket in it is full again, when forgetting
// it equals keeping it (a fresh bucket is a full one). A reconnect loop
// therefore gets what one long connection would: burst + rate × elapsed.
// A background sweep forgets full sets, so memory follows the users active
// in the last few seconds, not every user ever seen.
//
// The buckets are per gateway, not global. A global bucket would cost a
// NATS or Postgres round trip per send and per request; per gateway, a
// user who spreads a reconnect loop over N gateways gets at most N × each
// rate, and N is the operator's number of gateways (behind one load
// balancer address a client cannot even choose its gateway).

// limits are what a user, or a remote address before it logged in, may
// take of this gateway: the per-user buckets, the device cap, the cap on
// connections before hello, and the member counts that price a send.
type limits struct {
	users   *userBuckets
	devices *deviceCap
	preauth *preauthGate
	sizes   *memberCounts
}

func newLimits(opts *Options, st, sendStore *store.Store, m *metrics) *limits {
	return &limits{
		users:   newUserBuckets(opts, func(n int) { m.userLimits.Set(float64(n)) }),
		devices: newDeviceCap(opts.MaxDevicesPerUser, opts.DeviceIdleReap, st, m.devicesRefused),
		preauth: newPreauthGate(opts.PreauthConns, opts.PreauthConnsPerIP, m.preauthConns, m.preauthRefused),
		sizes:   newMemberCounts(sendStore.MemberCount, memberCountTTL, memberCountEntries),
	}
}

// helloDone ends nc's count as a connection before hello (a gateway
// assembled without limits, in a unit test, has none to end).
func (l *limits) helloDone(nc net.Conn) {
	if l != nil {
		l.preauth.done(nc)
	}
}

// run forgets, every sweepEvery, what no longer needs to be held: full
// bucket sets and device admissions the mirror has surely written.
func (l *limits) run(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			l.users.sweep(now)
			l.devices.sweep(now)
		}
	}
}

// userLimits is one user's buckets on this gateway.
type userLimits struct {
	backfill *rate.Limiter // backfill messages (UserBackfillRate/Burst)
	pulls    *rate.Limiter // conversation pulls (PullRate, burst the same)
	sends    *rate.Limiter // sends (SendRate, burst twice that)
	entries  *rate.Limiter // inbox entries sends may write (SendEntryRate/Burst)
	requests *rate.Limiter // summary_request, read, read_count, ack_range, refresh (RequestRate, burst twice that)
}

// full reports whether every bucket is full at now: then the set can be
// forgotten, since a new one would be the same.
func (u *userLimits) full(now time.Time) bool {
	for _, l := range []*rate.Limiter{u.backfill, u.pulls, u.sends, u.entries, u.requests} {
		if l.TokensAt(now) < float64(l.Burst()) {
			return false
		}
	}
	return true
}

// userBuckets holds every user's buckets on this gateway.
type userBuckets struct {
	opts  *Options
	held  func(n int) // reports how many users' buckets are held (a gauge)
	mu    sync.Mutex
	users map[int64]*userLimits
}

func newUserBuckets(opts *Options, held func(int)) *userBuckets {
	return &userBuckets{opts: opts, held: held, users: make(map[int64]*userLimits)}
}

// burstOf is a bucket size of rate r × factor, at least 1.
func burstOf(r rate.Limit, factor float64) int {
	return max(1, int(min(float64(r)*factor, 1<<30)))
}

// of returns uid's buckets, created full at the user's first use. Callers
// look them up at each use and keep no pointer: a set the sweep forgot
// (it was full) is replaced by a new full one, and a holder of the old one
// would take from a bucket nobody else sees.
func (b *userBuckets) of(uid int64) *userLimits {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.users[uid]
	if u == nil {
		o := b.opts
		u = &userLimits{
			backfill: rate.NewLimiter(o.UserBackfillRate, o.UserBackfillBurst),
			pulls:    rate.NewLimiter(o.PullRate, burstOf(o.PullRate, 1)),
			sends:    rate.NewLimiter(o.SendRate, burstOf(o.SendRate, 2)),
			entries:  rate.NewLimiter(o.SendEntryRate, max(1, o.SendEntryBurst)),
			requests: rate.NewLimiter(o.RequestRate, burstOf(o.RequestRate, 2)),
		}
		b.users[uid] = u
		b.held(len(b.users))
	}
	return u
}

// sweep forgets the buckets of users whose buckets are all full at now.
func (b *userBuckets) sweep(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for uid, u := range b.users {
		if u.full(now) {
			delete(b.users, uid)
		}
	}
	b.held(len(b.users))
}

// len reports how many users' buckets are held.
func (b *userBuckets) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.users)
}

// sweepEvery is how often full bucket sets are forgotten. With the default
// rates every bucket refills within 10 s (the entry bucket: 20,000 at
// 2,000/s), so a user's buckets are held for at most ~20 s after its last
// use.
const sweepEvery = 10 * time.Second

// limitedFor is how long a refused reservation would have had to wait,
// for retry_after_ms: at least 1 ms (0 would read as "no hint").
func limitedFor(d time.Duration) uint32 {
	return uint32(max(d, time.Millisecond) / time.Millisecond)
}

// reserve takes n tokens of l at now, or none. Granted, it returns the
// reservation (to give the tokens back with CancelAt when a later check
// refuses); refused, nil and the wait until n tokens will be there.
func reserve(l *rate.Limiter, now time.Time, n int) (*rate.Reservation, time.Duration) {
	r := l.ReserveN(now, n)
	if !r.OK() {
		return nil, time.Duration(float64(n)/float64(l.Limit())*float64(time.Second)) + time.Millisecond
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return nil, d
	}
	return r, 0
}
