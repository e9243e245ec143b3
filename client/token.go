package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// A token's life on the client: the server closes a connection at its
// token's exp (TOKEN_EXPIRED) unless the client refreshed it first. With
// Options.RefreshToken the client asks the application for a new token a
// while before exp (refreshLead) and sends it in a refresh frame; the
// session, its delivery state and its sends go on untouched. A refresh
// that fails is retried with backoff until exp; then the server ends the
// session, and the reconnect asks RefreshToken for a token first.

// tokenState is the token the client logs in with when TokenFunc is not
// set (c.mu).
type tokenState struct {
	cur   string    // the latest token: Options.Token, then each one refreshed
	exp   time.Time // its exp, as the server said (welcome, refresh_result); zero: unknown
	stale bool      // the server said it expired or refused it: ask RefreshToken before the next hello
	// sent is a refreshed token on its way to the server in the refresh
	// with request id sentID: the session's reader makes it cur when the
	// server's refresh_result arrives (refreshed), before it reads what
	// follows, so that a connection lost right behind the answer comes
	// back with it.
	sent   string
	sentID uint64
}

// maxRefreshLead bounds how long before exp a refresh starts.
const maxRefreshLead = 5 * time.Minute

// refreshLead is how long before exp, with left of the token's life to
// go, the client asks for a new one: a quarter of what is left, at most
// maxRefreshLead, which leaves room for retries when the application's
// token service is slow or briefly away.
func refreshLead(left time.Duration) time.Duration {
	return min(max(left/4, 0), maxRefreshLead)
}

func msTime(ms int64) time.Time {
	if ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

// token returns the token for the next hello: TokenFunc's if set;
// otherwise the latest one, or a new one from RefreshToken when there is
// none yet or the latest expired or was refused.
func (c *Client) token(ctx context.Context) (string, error) {
	if c.opts.TokenFunc != nil {
		return c.opts.TokenFunc(ctx)
	}
	c.mu.Lock()
	if c.tok.cur == "" && !c.tok.stale {
		c.tok.cur = c.opts.Token
	}
	st := c.tok
	c.mu.Unlock()
	expired := !st.exp.IsZero() && !time.Now().Before(st.exp)
	if c.opts.RefreshToken == nil || (!st.stale && !expired && st.cur != "") {
		return st.cur, nil
	}
	tok, err := c.opts.RefreshToken(ctx)
	if err != nil {
		return "", fmt.Errorf("RefreshToken: %w", err)
	}
	c.mu.Lock()
	c.tok = tokenState{cur: tok}
	c.mu.Unlock()
	return tok, nil
}

// tokenExpired marks the token stale: the server ended the session with
// TOKEN_EXPIRED.
func (c *Client) tokenExpired() {
	c.mu.Lock()
	c.tok.stale = true
	c.mu.Unlock()
}

// helloRefused is the error of a hello the server answered with we. A
// revoked device stops the client (ErrRevoked); an expired or refused
// token is asked anew before the next attempt.
func (c *Client) helloRefused(we *wire.Error) error {
	switch we.Code {
	case pb.ErrorCode_REVOKED:
		return fmt.Errorf("%w: %w", ErrRevoked, we)
	case pb.ErrorCode_TOKEN_EXPIRED, pb.ErrorCode_UNAUTHENTICATED:
		c.tokenExpired()
	}
	return we
}

// keepToken refreshes the session's token before each exp until the
// session ends.
func (s *session) keepToken(exp time.Time) {
	ctx, cancel := context.WithCancel(s.c.ctx)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	retry := 0
	for {
		left := time.Until(exp)
		wait := left - refreshLead(left)
		if retry > 0 {
			// After a failure: back off, but keep trying until exp.
			wait = min(s.c.opts.MinBackoff<<min(retry, 10), left/2)
		}
		t := time.NewTimer(max(wait, 0))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if !time.Now().Before(exp) {
			return // too late: the server ends the session, the reconnect gets a token
		}
		next, err := s.refresh(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.c.report(fmt.Errorf("client: token refresh: %w", err))
			retry++
			continue
		}
		exp, retry = next, 0
	}
}

// refresh asks the application for a token, hands it to the server on s
// and returns its exp once the server accepted it.
func (s *session) refresh(ctx context.Context) (time.Time, error) {
	rctx, cancel := context.WithTimeout(ctx, s.c.opts.DialTimeout)
	defer cancel()
	tok, err := s.c.opts.RefreshToken(rctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("RefreshToken: %w", err)
	}
	m, err := s.c.requestOn(rctx, s, func(id uint64) proto.Message {
		s.c.mu.Lock()
		s.c.tok.sent, s.c.tok.sentID = tok, id
		s.c.mu.Unlock()
		return &pb.Refresh{RequestId: id, Token: tok}
	})
	if err != nil {
		return time.Time{}, err
	}
	r, ok := m.(*pb.RefreshResult)
	if !ok {
		return time.Time{}, errors.New("client: refresh answered with " + fmt.Sprintf("%T", m))
	}
	return msTime(r.GetExpiresAtMs()), nil // the reader took the token (refreshed)
}

// refreshed takes the token of the refresh that r answers as the latest,
// with its exp: the session's reader calls it as the answer arrives.
func (c *Client) refreshed(r *pb.RefreshResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok.sent != "" && c.tok.sentID == r.GetRequestId() {
		c.tok = tokenState{cur: c.tok.sent, exp: msTime(r.GetExpiresAtMs())}
	}
}
