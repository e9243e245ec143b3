package gateway

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// The login: the first frame must be a hello with a valid token that is
// not revoked (checked in the query that reads the summary); then the
// device's session opens, the welcome goes out first, and the session
// starts; the connection lives until the token's exp (tokenlife.go).
// Every refusal is a fatal coded error, and a log line with the remote
// address (rate-limited: loginFailed).

// hello runs the login. It reports whether the session may go on.
func (c *Conn) hello() bool {
	defer c.g.limits.helloDone(c.nc)
	h, ok := c.readHello()
	if !ok {
		return false
	}
	helloAt := time.Now()
	ticket, ok := c.admitLogin()
	if !ok {
		return false
	}
	defer ticket.done(false) // a refused login gives its slot back unmeasured
	id, err := c.g.verifier.Verify(h.GetToken())
	if err != nil {
		c.g.metrics.authFailures.Inc()
		c.loginFailed(wire.Errorf(pb.ErrorCode_UNAUTHENTICATED, "%v", err), nil)
		return false
	}
	if !id.ExpiresAt.After(time.Now()) {
		// Past exp, accepted only by the verifier's leeway for clock
		// skew: the connection would end right after its welcome.
		c.g.metrics.authFailures.Inc()
		c.loginFailed(wire.Errorf(pb.ErrorCode_TOKEN_EXPIRED, "the token expired at %s; get a new token",
			id.ExpiresAt.UTC().Format(time.RFC3339)), nil)
		return false
	}
	kind, werr := deviceKind(h.GetDeviceKind())
	if werr != nil {
		c.loginFailed(werr, nil)
		return false
	}
	c.id, c.kind = id, kind
	// The deadline runs from now: a token that expires while the session
	// opens ends the login with TOKEN_EXPIRED; and a revocation that
	// arrives meanwhile is checked against this token's iat.
	c.setToken(id.IssuedAt, id.ExpiresAt)
	if !c.admitDevice() {
		return false
	}
	sess, pending, summary, ok := c.openSession(id)
	if !ok {
		return false
	}
	c.g.metrics.handshakes.Inc()
	summary.Pending = pending
	tooLong := pending > uint64(c.g.opts.OfflineThreshold)
	// The welcome is the first frame; live entries that arrived meanwhile
	// and the backfill follow it (start).
	ok = c.enqueue(outItem{msg: c.welcome(sess, pending, summary, tooLong)})
	ticket.done(true)
	c.g.metrics.login.Observe(time.Since(helloAt).Seconds())
	if c.isClosed() {
		sess.close() // closed while the session opened
		return false
	}
	if tooLong {
		nctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := sess.sendNewest(nctx); err != nil {
			c.logger().Warn("newest page", zap.Error(err)) // the drain still delivers everything
		}
		cancel()
	}
	sess.start()
	return ok
}

// admitLogin takes a slot of the gateway's login budget (admission.go),
// waiting for one if need be; refused, the login ends with the budget's
// fatal UNAVAILABLE and its retry_after_ms. While it waits, the
// connection is watched: a peer that hangs up leaves the queue.
func (c *Conn) admitLogin() (*loginTicket, bool) {
	var w *closeWatch
	ticket, we := c.g.admit.acquire(func() <-chan struct{} {
		w = c.watchClose()
		return w.gone
	})
	if w != nil {
		w.stop()
	}
	switch {
	case we != nil:
		c.loginFailed(we, nil)
		return nil, false
	case ticket == nil: // the peer left while it waited
		return nil, false
	}
	return ticket, true
}

// closeWatch notices that a connection's peer hung up while its login
// waits: nothing reads the connection then (the client awaits its
// welcome), so a peek stands in for the reader. A peek consumes nothing;
// bytes the client sent meanwhile stay for the reader.
type closeWatch struct {
	c    *Conn
	gone chan struct{} // closed when the peer is gone
	done chan struct{} // closed when the peek returned
}

func (c *Conn) watchClose() *closeWatch {
	w := &closeWatch{c: c, gone: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		if _, err := c.tr.buffered().Peek(1); err != nil && !isTimeout(err) {
			close(w.gone)
		}
	}()
	return w
}

// stop ends the peek (an expired read deadline, which leaves the reader
// usable) and waits for it; the hello's deadline holds again after.
func (w *closeWatch) stop() {
	_ = w.c.nc.SetReadDeadline(time.Now())
	<-w.done
	_ = w.c.nc.SetReadDeadline(time.Now().Add(w.c.g.opts.HelloTimeout))
}

// readHello reads the first frame within the hello timeout; it must be a
// hello. The frame's form (binary or JSON) is the connection's from then on.
func (c *Conn) readHello() (*pb.Hello, bool) {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.g.opts.HelloTimeout))
	frame, text, err := c.tr.readFrame()
	if err != nil {
		c.readFailed(err, false)
		return nil, false
	}
	c.json = text
	t, m, err := decode(frame, text)
	if err != nil {
		var we *wire.Error
		if !errors.As(err, &we) {
			we = wire.Errorf(pb.ErrorCode_BAD_FRAME, "%v", err)
		}
		c.loginFailed(we, nil)
		return nil, false
	}
	h, ok := m.(*pb.Hello)
	if !ok {
		c.loginFailed(wire.Errorf(pb.ErrorCode_UNAUTHENTICATED, "the first frame must be hello, got %s", t), nil)
		return nil, false
	}
	return h, true
}

// deviceKind checks hello's device_kind (empty: desktop).
func deviceKind(k string) (string, *wire.Error) {
	switch k {
	case "":
		return "desktop", nil
	case "mobile", "desktop", "web":
		return k, nil
	}
	return "", wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "device_kind %q: want mobile, desktop or web", k)
}

// A login's Postgres read goes in a batch with the logins around it
// (store.LoginBatcher): at most loginFlights batches in flight, each of at
// most loginBatchMax logins. One login alone leaves at once; in a wave the
// batches grow, and Postgres pays its per-statement cost per batch. A
// batch in flight holds a connection of the catch-up pool, which pages
// and pulls share: half of the pool at most, so that a login wave leaves
// catch-up reads their share.
const loginBatchMax = 128

func loginFlights(st *store.Store) int {
	return max(int(st.Pool.Config().MaxConns)/2, 1)
}

// openSession reads the revocation covering the device and the first page
// of its summary (one Postgres round trip), then opens the device's
// session. The revocation is known before the session registers: a
// revoked token must not replace (SESSION_REPLACED) the device's
// legitimate session before it is refused. Either failing fails the
// login: an empty summary would tell the device it has nothing unread,
// and the client retries UNAVAILABLE with backoff.
func (c *Conn) openSession(id auth.Identity) (*session, uint64, *pb.Summary, bool) {
	lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	ls, err := c.g.logins.Login(lctx, id.UID, id.Device)
	cancel()
	if err != nil {
		c.loginFailed(wire.Errorf(pb.ErrorCode_UNAVAILABLE, "cannot read the login summary now; retry"), err)
		return nil, 0, nil, false
	}
	if revokes(ls.RevokedAt, id.IssuedAt) {
		c.loginFailed(revokedError(ls.RevokedAt), nil)
		return nil, 0, nil, false
	}
	sess, pending, err := c.g.startSession(context.Background(), c, &mirrorRead{c: ls.Cursor, found: ls.CursorFound})
	if errors.Is(err, errTooManyConns) {
		c.loginFailed(wire.Errorf(pb.ErrorCode_LIMIT_EXCEEDED, "user %d already holds %d connections on this gateway", id.UID, c.g.opts.MaxConnsPerUser), nil)
		return nil, 0, nil, false
	}
	if errors.Is(err, errOlderLogin) {
		c.loginFailed(wire.Errorf(pb.ErrorCode_SESSION_REPLACED, "this device logged in on a newer connection"), nil)
		return nil, 0, nil, false
	}
	if err != nil {
		c.loginFailed(wire.Errorf(pb.ErrorCode_UNAVAILABLE, "cannot open the device's inbox now; retry"), err)
		return nil, 0, nil, false
	}
	return sess, pending, summaryOf(ls.Convs, ls.More), true
}

func (c *Conn) welcome(sess *session, pending uint64, summary *pb.Summary, tooLong bool) *pb.Welcome {
	return &pb.Welcome{
		Uid:              c.id.UID,
		Device:           c.id.Device,
		Cursor:           sess.State().Cursor,
		Epoch:            c.g.epoch,
		HeartbeatMs:      uint32(c.g.opts.Heartbeat / time.Millisecond),
		MaxFrame:         uint32(c.g.opts.MaxFrame),
		Server:           "inboxd/" + c.g.opts.ID,
		Pending:          pending,
		PageSize:         uint32(sess.prof.pageSize),
		MaxInflightSends: uint32(c.g.opts.MaxInflightSends),
		Summary:          summary,
		OfflineTooLong:   tooLong,
		TokenExpiresAtMs: c.id.ExpiresAt.UnixMilli(),
		InboxEpoch:       sess.epoch.Load(),
	}
}

// loginFailed refuses the login with we (fatal) and logs it with the
// remote address, at most a few lines a second per gateway: a wave of
// clients with expired tokens must not flood the log. cause, if any, is
// what went wrong inside (never sent to the client).
func (c *Conn) loginFailed(we *wire.Error, cause error) {
	c.fail(we, true)
	c.authFailed("login refused", we, cause)
}

// authFailed logs a refused login, refresh or connection (expired,
// revoked) at warn, as msg with the remote address, through the login
// lines' limiter.
func (c *Conn) authFailed(msg string, we *wire.Error, cause error) {
	ok, suppressed := c.g.loginWarns.allow()
	if !ok {
		return
	}
	fields := []zap.Field{zap.String("remote", c.nc.RemoteAddr().String()), zap.String("code", we.Code.String()),
		zap.String("reason", we.Message), zap.Int64("suppressed", suppressed)}
	if c.id.UID != 0 {
		fields = append(fields, zap.Int64("uid", c.id.UID), zap.String("device", c.id.Device))
	}
	if cause != nil {
		fields = append(fields, zap.Error(cause))
	}
	c.g.log.Warn(msg, fields...)
}

// summary reads a page of the user's login summary: the first (before 0)
// or the one after the conversation whose last message is before.
func (c *Conn) summary(ctx context.Context, before int64) (*pb.Summary, error) {
	rows, more, err := c.g.st.Summary(ctx, c.id.UID, before, store.SummaryLimit)
	if err != nil {
		return nil, err
	}
	return summaryOf(rows, more), nil
}

// summaryOf is a summary page on the wire.
func summaryOf(rows []store.ConvSummary, more bool) *pb.Summary {
	s := &pb.Summary{HasMore: more}
	for _, r := range rows {
		s.Convs = append(s.Convs, &pb.ConvSummary{ConvId: r.ConvID, Unread: r.Unread, LastSeq: r.LastSeq, ReadSeq: r.ReadSeq,
			LastMsgId: r.LastMsgID, LastSenderUid: r.LastSenderUID, LastPreview: r.LastPreview, LastAtMs: r.LastAt.UnixMilli(),
			ExpiredUpToConvSeq: r.ExpiredUpTo})
	}
	if more {
		s.NextBeforeMsgId = rows[len(rows)-1].LastMsgID
	}
	return s
}
