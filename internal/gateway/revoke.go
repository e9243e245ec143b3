package gateway

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// Revocations (inboxctl user revoke, recorded in Postgres by the admin
// API) reach a gateway three ways:
//
//   - at hello and in a refresh, the token is checked against Postgres
//     (at hello in the query that reads the summary: no round trip of
//     its own);
//   - the admin API announces each one on the user's kick subject, to
//     which the gateway is subscribed while the user is connected: the
//     connections whose token it covers close at once with REVOKED;
//   - the announcement is core NATS (at most once: a gateway cut from
//     NATS, or whose router queue overflowed, misses it), so the gateway
//     also sweeps the revocations recorded since its last sweep, every
//     RevocationSweep and at once after its NATS connection came back.

// revokes reports whether a revocation at revokedAt (zero: none) covers a
// token issued at iat. iat has a precision of a second (JWT NumericDate):
// a token whose iat is the revocation's second may have been issued
// before it, and is refused (a new token works from the next second on).
// A token without iat is covered by any revocation.
func revokes(revokedAt, iat time.Time) bool {
	return !revokedAt.IsZero() && !iat.After(revokedAt)
}

func revokedError(at time.Time) *wire.Error {
	return wire.Errorf(pb.ErrorCode_REVOKED, "the device's tokens issued up to %s were revoked; sign in again",
		at.UTC().Format(time.RFC3339))
}

// revoke closes the connections of uid's device (every device: "") whose
// token the revocation at at covers.
func (g *Gateway) revoke(uid int64, device string, at time.Time) {
	for _, s := range g.router.sessionsOf(uid) {
		if device != "" && s.device != device {
			continue
		}
		if revokes(at, s.c.tokenIssuedAt()) {
			s.c.end(revokedError(at), "connection revoked")
		}
	}
}

// revocationSweep applies the revocations recorded since the previous
// sweep (with a margin for transactions that committed late), every
// interval and whenever poked (after a NATS reconnect).
type revocationSweep struct {
	g    *Gateway
	poke chan struct{}
}

// sweepMargin widens each sweep's window beyond the time since the last
// one: a revocation's revoked_at is its transaction's start, which may
// commit a little later, and the database's clock ticks on its own.
const sweepMargin = 10 * time.Second

func newRevocationSweep(g *Gateway) *revocationSweep {
	return &revocationSweep{g: g, poke: make(chan struct{}, 1)}
}

// now asks for a sweep as soon as possible.
func (rs *revocationSweep) now() {
	select {
	case rs.poke <- struct{}{}:
	default:
	}
}

func (rs *revocationSweep) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now() // a session that logged in since was checked at its hello
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-rs.poke:
		}
		start := time.Now()
		if err := rs.sweep(ctx, start.Sub(last)+sweepMargin); err != nil {
			rs.g.log.Warn("revocation sweep; will retry", zap.Error(err))
			continue // the next one covers this one's window too
		}
		last = start
	}
}

func (rs *revocationSweep) sweep(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	revs, err := rs.g.st.RecentRevocations(ctx, within)
	if err != nil {
		return err
	}
	for _, r := range revs {
		rs.g.revoke(r.UID, r.Device, r.At)
	}
	return nil
}
