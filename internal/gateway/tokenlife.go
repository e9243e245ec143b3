package gateway

import (
	"context"
	"time"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// A connection lives as long as its token: at the token's exp the gateway
// sends a fatal TOKEN_EXPIRED error and closes, unless the client sent a
// refresh with a new token of the same uid and device first, which moves
// the deadline to the new token's exp. A revocation of the device (or of
// its user) closes a connection whose token was issued before it with a
// fatal REVOKED (revoke.go).
//
// The deadline is a runtime timer (time.AfterFunc): it costs an idle
// connection no goroutine, only the timer in the runtime's heap.

// setToken makes the token issued at iat and expiring at exp the
// connection's: its deadline and what a revocation is checked against.
func (c *Conn) setToken(iat, exp time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tokenIat, c.tokenExp = iat, exp
	if c.isClosed() {
		return // closed meanwhile: close's stopExpiry ran, no timer may outlive it
	}
	if c.expiry == nil {
		c.expiry = time.AfterFunc(time.Until(exp), c.expired)
		return
	}
	c.expiry.Reset(time.Until(exp))
}

// stopExpiry releases the deadline's timer (the connection closes).
func (c *Conn) stopExpiry() {
	c.mu.Lock()
	if c.expiry != nil {
		c.expiry.Stop()
	}
	c.mu.Unlock()
}

// tokenIssuedAt is when the connection's current token was issued.
func (c *Conn) tokenIssuedAt() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tokenIat
}

// expired runs at the deadline: the connection ends with TOKEN_EXPIRED
// unless a refresh moved the deadline meanwhile (a firing that raced the
// refresh's Reset).
func (c *Conn) expired() {
	c.mu.Lock()
	exp := c.tokenExp
	c.mu.Unlock()
	if time.Now().Before(exp) {
		return
	}
	c.end(wire.Errorf(pb.ErrorCode_TOKEN_EXPIRED, "the token expired at %s; get a new token and reconnect (or refresh before exp)",
		exp.UTC().Format(time.RFC3339)), "token expired on an open connection")
}

// end closes a logged-in connection from outside its reader (the
// deadline, a revocation): the fatal error goes out first, and the
// refusal is logged like a refused login.
func (c *Conn) end(we *wire.Error, why string) {
	e := we.Proto()
	e.Fatal = true
	c.g.metrics.errors.WithLabelValues(e.Code.String()).Inc()
	if c.enqueue(outItem{msg: e, close: true}) {
		c.authFailed(why, we, nil)
	}
}

// handleRefresh checks a refresh's token on the reader goroutine (a
// signature check and, once it verified, one Postgres read; refreshes
// count in the user's request rate, overRequestRate): it must verify, name the connection's uid and device, expire
// in the future and not be revoked. Then the deadline moves to its exp and
// refresh_result answers. A refused refresh gets a non-fatal error with
// the request's id, and the old deadline stays.
func (c *Conn) handleRefresh(r *pb.Refresh) {
	id, we, cause := c.checkRefresh(r.GetToken())
	if we != nil {
		c.answerError(r.GetRequestId(), we)
		c.authFailed("refresh refused", we, cause)
		return
	}
	c.setToken(id.IssuedAt, id.ExpiresAt)
	c.g.metrics.refreshes.Inc()
	c.enqueue(outItem{msg: &pb.RefreshResult{RequestId: r.GetRequestId(), ExpiresAtMs: id.ExpiresAt.UnixMilli()}})
}

// checkRefresh verifies the token of a refresh; a refusal is the error
// for the client and, if any, what went wrong inside.
func (c *Conn) checkRefresh(token string) (auth.Identity, *wire.Error, error) {
	id, err := c.g.verifier.Verify(token)
	if err != nil {
		return id, wire.Errorf(pb.ErrorCode_UNAUTHENTICATED, "%v", err), nil
	}
	if id.UID != c.id.UID || id.Device != c.id.Device {
		return id, wire.Errorf(pb.ErrorCode_UNAUTHENTICATED, "the refresh token is for %d/%q, the connection for %d/%q",
			id.UID, id.Device, c.id.UID, c.id.Device), nil
	}
	if !id.ExpiresAt.After(time.Now()) {
		return id, wire.Errorf(pb.ErrorCode_UNAUTHENTICATED, "the refresh token expired at %s", id.ExpiresAt.UTC().Format(time.RFC3339)), nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	at, err := c.g.st.RevokedAt(ctx, id.UID, id.Device)
	cancel()
	if err != nil {
		return id, wire.Errorf(pb.ErrorCode_UNAVAILABLE, "cannot check the token now; retry"), err
	}
	if revokes(at, id.IssuedAt) {
		return id, revokedError(at), nil
	}
	return id, nil, nil
}

// answerError sends a non-fatal error answering request id.
func (c *Conn) answerError(id uint64, we *wire.Error) {
	e := we.Proto()
	e.RequestId = id
	c.g.metrics.errors.WithLabelValues(e.Code.String()).Inc()
	c.enqueue(outItem{msg: e})
}
