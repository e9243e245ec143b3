// Package client is the Go client of inboxd: it connects over WebSocket or
// raw TCP, says hello with a signed token, refreshes the token on the
// connection before it expires (Options.RefreshToken), reconnects with
// jittered backoff (but not once its device logged in elsewhere,
// ErrReplaced, or was revoked, ErrRevoked), and sends messages
// idempotently (a send is retried with the same client_msg_id until the
// server answers STORED or REJECTED).
package client

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// Options configures a client.
type Options struct {
	// URL of the gateway: ws://127.0.0.1:7070/ws or tcp://127.0.0.1:7071;
	// wss:// and tls:// for a gateway serving TLS.
	URL string
	// TLSConfig configures wss:// and tls:// (root CAs, server name).
	TLSConfig *tls.Config
	// Token is presented in hello; TokenFunc, when set, is asked for a fresh
	// token on every (re)connect instead.
	Token     string
	TokenFunc func(ctx context.Context) (string, error)
	// RefreshToken, when set, is asked for a new token of the same uid and
	// device before the current one expires (the welcome and each refresh
	// say when): the client hands it to the server on the connection (a
	// refresh frame), and the session goes on past the old token's exp.
	// It is asked too before a reconnect when the token expired or was
	// refused (TOKEN_EXPIRED, UNAUTHENTICATED), unless TokenFunc is set.
	// Without it, the server ends a connection at its token's exp
	// (TOKEN_EXPIRED) and the client reconnects with Token or TokenFunc.
	RefreshToken func(ctx context.Context) (string, error)
	// DeviceKind is mobile, desktop or web (default desktop).
	DeviceKind string
	// DialTimeout bounds one connection attempt including hello (default 10s).
	DialTimeout time.Duration
	// MinBackoff and MaxBackoff bound the jittered reconnect delay
	// (defaults 100ms and 5s). A server that ends a session or refuses a
	// hello with retry_after_ms is not dialled again before that time.
	MinBackoff, MaxBackoff time.Duration
	// MaxFrame is the largest server frame accepted (default 16 MiB).
	MaxFrame int
	// LocalAddr, when set, is the local address to dial from (load tools
	// spread connections over 127.0.0.x source addresses).
	LocalAddr net.Addr
	// OnError, when set, receives the errors the client gets over (protocol
	// errors from the server, lost connections, failed connection
	// attempts, refused token refreshes), and once the error that stopped
	// it (ErrReplaced, ErrRevoked).
	OnError func(error)

	// Handler receives the device's messages (see Handler). Without one the
	// client only sends: it confirms nothing, so its device's cursor stays.
	Handler Handler
	// GapWait is how long a live message waits for earlier messages of its
	// conversation before it is handed over anyway (default 500ms).
	GapWait time.Duration
	// DedupeSize is how many recent msg_ids are remembered to drop repeats
	// (default 1,000,000).
	DedupeSize int
	// Delivered, when set, is asked about every message the client has not
	// handed over itself: an application that persists what it stored
	// answers true for those, so a restarted application does not get them
	// twice (they are confirmed again instead).
	Delivered func(msgID int64) bool
	// LastConvSeq, when set, returns where the application has a
	// conversation in order (0: none): the highest conv_seq of the
	// messages handed over to it, not counting those of Lane "newest" (a
	// newest page is ahead of order by design; Delivered knows them). A
	// restarted application then keeps conv_seq order across restarts: a
	// message after a gap waits for the missing ones (or fetches them with
	// a conversation pull) instead of being taken as the first one seen.
	// Counting a newest page would make the older messages the backfill
	// still brings come flagged Late.
	LastConvSeq func(convID int64) int64
	// NoAck never confirms anything: like a client that crashes before it
	// stored what it got (tests, inboxctl sync --no-ack).
	NoAck bool
	// OnEvent, when set, is called (on the delivery goroutine) with each
	// per-user event: read_sync from the user's other devices, delivered and
	// read receipts of direct conversations. Conversations() reflects them
	// either way.
	OnEvent func(Event)
}

func (o *Options) setDefaults() {
	if o.DeviceKind == "" {
		o.DeviceKind = "desktop"
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	if o.MaxFrame <= 0 {
		o.MaxFrame = 16 << 20
	}
	if o.GapWait <= 0 {
		o.GapWait = 500 * time.Millisecond
	}
	if o.DedupeSize <= 0 {
		o.DedupeSize = 1 << 20
	}
}

// ErrClosed is returned by calls on a closed client.
var ErrClosed = errors.New("client: closed")

// ErrReplaced ends a client whose device (the uid and device id of its
// token) logged in on another connection: the server ends the older session
// with SESSION_REPLACED. The newer login wins, as in other IM clients: the
// replaced client stops for good, as if closed, and does not reconnect —
// two running copies of one device would otherwise take the session from
// each other in a loop, each login resetting the other's delivery. The
// error reaches OnError once, Done is closed, and Err, Close, pending
// sends and every later call return it (errors.Is(err, ErrReplaced); it
// wraps the server's *wire.Error). An application shows it ("signed in
// elsewhere") and Dials again only if the user wants the session back.
var ErrReplaced = errors.New("client: session replaced")

// ErrRevoked ends a client whose device or user was revoked by an
// operator (inboxctl user revoke): the server closed its connection, or
// refused its hello, with REVOKED, and refuses every token of the device
// issued before the revocation. The client stops for good, like
// ErrReplaced (Done, Err, Close, pending sends and later calls; it wraps
// the server's *wire.Error): the user signs in again, and the application
// Dials with a token issued after the revocation.
var ErrRevoked = errors.New("client: revoked")

// Client is a connection to inboxd that survives reconnects.
type Client struct {
	opts Options

	mu      sync.Mutex
	cur     *session
	welcome *pb.Welcome
	closed  bool  // by Close or by the server (err)
	err     error // why the server stopped the client (ErrReplaced, ErrRevoked), nil after Close
	tok     tokenState

	// Sends: every send not answered for good is in pending; those waiting
	// for a slot on the wire are in queue, in issue order. At most limit are
	// on the wire at once (the server's max_inflight_sends).
	pending  map[string]*pendingSend
	queue    []*pendingSend
	inflight int
	// abandoned counts, per client_msg_id, attempts on the wire of the
	// current session whose waiter gave up: each holds a slot until the
	// server answers it.
	abandoned map[string]int
	limit     int
	nextOrd   uint64
	sendMu    sync.Mutex // orders writes of sends

	recv    *receiver // nil without a Handler
	convs   map[int64]*Conversation
	reqs    map[uint64]chan proto.Message
	nextReq uint64

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// pendingSend is a send awaiting STORED or REJECTED.
type pendingSend struct {
	req      *pb.Send
	frame    []byte // the encoded send frame, written again on every retry
	result   chan *pb.SendResult
	order    uint64
	onWire   bool // written on the current session, no answer yet
	queued   bool
	attempts int
}

// Dial connects, says hello and waits for welcome. The client then keeps the
// connection up (reconnecting as needed) until Close, or until the device
// logs in on another connection (ErrReplaced) or is revoked (ErrRevoked),
// after which it does not reconnect. Dial fails when the first connection
// fails: a wrong token or URL is reported, not retried (a revoked device's
// token: errors.Is(err, ErrRevoked)).
func Dial(ctx context.Context, opts Options) (*Client, error) {
	opts.setDefaults()
	c := &Client{
		opts:      opts,
		pending:   make(map[string]*pendingSend),
		abandoned: make(map[string]int),
		done:      make(chan struct{}),
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if opts.Handler != nil {
		c.recv = newReceiver(c)
		go c.recv.run()
	}
	s, err := c.connect(ctx)
	if err != nil {
		c.cancel()
		return nil, err
	}
	c.mu.Lock()
	c.cur, c.welcome = s, s.welcome
	c.mu.Unlock()
	c.applySummary(s.welcome.GetSummary())
	go c.run(s)
	return c, nil
}

// Welcome returns the welcome of the current (or last) session.
func (c *Client) Welcome() *pb.Welcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.welcome
}

// Done is closed once the client stopped: after Close, or when the server
// ended it for good (see Err).
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is nil while the client runs. Once it stopped it is ErrClosed after
// Close, or the error that stopped it on its own (ErrReplaced, ErrRevoked).
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		return nil
	}
	return c.stopErrLocked()
}

// stopErrLocked is what calls on a stopped client return.
func (c *Client) stopErrLocked() error {
	if c.err != nil {
		return c.err
	}
	return ErrClosed
}

// Close ends the session and stops reconnecting. Pending sends fail with
// ErrClosed. Close of a client that had stopped on its own returns the
// reason (ErrReplaced, ErrRevoked) once it is fully stopped.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		err := c.err
		c.mu.Unlock()
		<-c.done
		return err
	}
	c.closed = true
	s := c.cur
	c.mu.Unlock()
	if c.recv != nil {
		// Confirm what the handler took before the connection goes.
		ch := make(chan struct{})
		select {
		case c.recv.in <- event{closing: ch}:
			select {
			case <-ch:
			case <-time.After(5 * time.Second):
			}
		case <-time.After(5 * time.Second):
		}
	}
	c.cancel()
	if s != nil {
		s.conn.close()
	}
	c.mu.Lock()
	if c.cur != nil && c.cur != s {
		c.cur.conn.close() // a session that came up meanwhile
	}
	c.mu.Unlock()
	<-c.done
	return nil
}

// stoppedBy stops the client because the server ended s for good (why:
// ErrReplaced or ErrRevoked). The client is marked stopped before the
// connection closes, so that everything waiting on s learns why; run
// finishes the stop.
func (c *Client) stoppedBy(s *session, why error, werr *wire.Error) {
	err := fmt.Errorf("%w: %w", why, werr)
	s.stopped = err
	c.stopWith(err)
	s.conn.close()
}

// stopWith marks the client stopped by err (unless Close came first) and
// reports it once.
func (c *Client) stopWith(err error) {
	c.mu.Lock()
	first := !c.closed
	if first { // not during Close: then it is only closed
		c.closed, c.err = true, err
	}
	c.mu.Unlock()
	if first {
		c.report(err)
	}
}

func (c *Client) report(err error) {
	if c.opts.OnError != nil && err != nil {
		c.opts.OnError(err)
	}
}

// connect dials and completes hello.
func (c *Client) connect(ctx context.Context) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.DialTimeout)
	defer cancel()
	tok, err := c.token(ctx)
	if err != nil {
		return nil, fmt.Errorf("client: token: %w", err)
	}
	cn, err := dial(ctx, c.opts.URL, c.opts.MaxFrame, c.opts.LocalAddr, c.opts.TLSConfig)
	if err != nil {
		return nil, fmt.Errorf("client: dial %s: %w", c.opts.URL, err)
	}
	s := &session{c: c, conn: cn, done: make(chan struct{})}
	deadline, _ := ctx.Deadline()
	if err := s.write(&pb.Hello{Token: tok, DeviceKind: c.opts.DeviceKind, Client: "inboxd-go"}); err != nil {
		cn.close()
		return nil, fmt.Errorf("client: hello: %w", err)
	}
	cn.setReadDeadline(deadline)
	frame, err := cn.readFrame()
	if err != nil {
		cn.close()
		return nil, fmt.Errorf("client: waiting for welcome: %w", err)
	}
	_, m, err := wire.Decode(frame)
	if err != nil {
		cn.close()
		return nil, fmt.Errorf("client: welcome: %w", err)
	}
	switch m := m.(type) {
	case *pb.Welcome:
		s.welcome = m
	case *pb.Error:
		cn.close()
		return nil, c.helloRefused(wire.FromProto(m))
	default:
		cn.close()
		return nil, fmt.Errorf("client: expected welcome, got %T", m)
	}
	return s, nil
}

// run keeps a session up until Close, a replacement (ErrReplaced) or a
// revocation (ErrRevoked).
func (c *Client) run(s *session) {
	defer close(c.done)
	attempt := 0
	var hint time.Duration // the server's retry_after_ms, from the last session or refused hello
	for {
		if s != nil {
			if !c.up(s) {
				s.conn.close() // it came up while Close ran
				c.failPending(ErrClosed)
				return
			}
			attempt = 0
			s.run()
			c.down(s)
			if s.stopped != nil {
				// The device logged in elsewhere: that login wins (see
				// ErrReplaced); or it was revoked (ErrRevoked). handle
				// already marked the client stopped.
				c.cancel()
				c.mu.Lock()
				err := c.stopErrLocked()
				c.mu.Unlock()
				c.failPending(err)
				return
			}
			hint = s.retryAfter()
		}
		if c.ctx.Err() != nil {
			c.failPending(ErrClosed)
			return
		}
		d := c.opts.reconnectDelay(attempt, hint)
		attempt++
		select {
		case <-c.ctx.Done():
			c.failPending(ErrClosed)
			return
		case <-time.After(d):
		}
		var err error
		s, err = c.connect(c.ctx)
		hint = 0
		if errors.Is(err, ErrRevoked) {
			c.stopWith(err)
			c.cancel()
			c.failPending(err)
			return
		}
		if err != nil {
			c.report(err)
			s = nil
			var we *wire.Error
			if errors.As(err, &we) {
				hint = time.Duration(we.RetryAfterMs) * time.Millisecond
			}
		}
	}
}

// reconnectDelay is the wait before reconnect attempt (0 right after a
// session ended): jittered exponential backoff ("full jitter": a fleet of
// clients that lost the same gateway does not come back in lockstep),
// after the server's retry hint if it gave one (an overloaded or draining
// gateway says when to come back; the jitter on top spreads those it told
// the same).
func (o *Options) reconnectDelay(attempt int, hint time.Duration) time.Duration {
	d := min(o.MaxBackoff, o.MinBackoff<<min(attempt, 16))
	return max(hint, 0) + time.Duration(rand.Int64N(int64(d))+1)
}

// up makes s the current session and sends every pending send on it, in
// issue order. It returns false, and does nothing, once Close was called.
func (c *Client) up(s *session) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.cur = s
	c.welcome = s.welcome
	c.inflight = 0
	c.abandoned = map[string]int{}
	c.mu.Unlock()
	c.applySummary(s.welcome.GetSummary())
	c.mu.Lock()
	c.tok.exp = msTime(s.welcome.GetTokenExpiresAtMs())
	c.limit = int(s.welcome.GetMaxInflightSends())
	if c.limit <= 0 {
		c.limit = 256
	}
	c.queue = c.queue[:0]
	for _, p := range c.pending {
		p.onWire, p.queued = false, true
		c.queue = append(c.queue, p)
	}
	slices.SortFunc(c.queue, func(a, b *pendingSend) int { return cmp.Compare(a.order, b.order) })
	c.mu.Unlock()
	c.pump(s)
	c.toReceiver(event{s: s, start: true})
	if c.opts.RefreshToken != nil && s.welcome.GetTokenExpiresAtMs() > 0 {
		go s.keepToken(msTime(s.welcome.GetTokenExpiresAtMs()))
	}
	return true
}

// toReceiver hands an event to the receiver (blocking: a slow handler slows
// reading, which the server sees as backpressure).
func (c *Client) toReceiver(ev event) {
	if c.recv == nil {
		return
	}
	select {
	case c.recv.in <- ev:
	case <-c.ctx.Done():
	}
}

func (c *Client) down(s *session) {
	c.toReceiver(event{s: s, down: true})
	c.mu.Lock()
	if c.cur == s {
		c.cur = nil
	}
	c.mu.Unlock()
}

func (c *Client) failPending(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, p := range c.pending {
		select {
		case p.result <- &pb.SendResult{ClientMsgId: id, Status: pb.SendStatus_FAILED, Code: pb.ErrorCode_UNAVAILABLE, Message: err.Error()}:
		default:
		}
		delete(c.pending, id)
	}
	c.queue = nil
}

// pump writes queued sends on s while there is room on the wire.
func (c *Client) pump(s *session) {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	for {
		c.mu.Lock()
		if c.cur != s || c.inflight >= c.limit || len(c.queue) == 0 {
			c.mu.Unlock()
			return
		}
		p := c.queue[0]
		c.queue = c.queue[1:]
		p.queued = false
		if !c.fitsLocked(s, p) {
			c.mu.Unlock()
			continue
		}
		p.onWire = true
		c.inflight++
		c.mu.Unlock()
		if err := s.conn.writeFrame(p.frame, time.Now().Add(10*time.Second)); err != nil {
			s.conn.close() // the session ends; up() sends again on the next one
			return
		}
	}
}

// requeueLocked puts p back in line (in issue order) for another attempt.
func (c *Client) requeueLocked(p *pendingSend) {
	if p.queued || p.onWire || c.pending[p.req.GetClientMsgId()] != p {
		return
	}
	i, _ := slices.BinarySearchFunc(c.queue, p.order, func(q *pendingSend, o uint64) int { return cmp.Compare(q.order, o) })
	c.queue = slices.Insert(c.queue, i, p)
	p.queued = true
}

// session is one connection's lifetime.
type session struct {
	c       *Client
	conn    conn
	welcome *pb.Welcome
	done    chan struct{}
	// hint is the retry_after_ms of the fatal error the server ended the
	// session with; stopped is set when that error stops the client
	// (SESSION_REPLACED, REVOKED). Both are written by run's goroutine and
	// read once run returned.
	hint    time.Duration
	stopped error
}

// retryAfter is the server's hint for when to come back (0: none).
func (s *session) retryAfter() time.Duration { return s.hint }

func (s *session) write(m proto.Message) error {
	frame, err := wire.AppendFrame(nil, m)
	if err != nil {
		return err
	}
	return s.conn.writeFrame(frame, time.Now().Add(10*time.Second))
}

// run reads frames until the connection ends, and pings every heartbeat.
func (s *session) run() {
	defer close(s.done)
	defer s.conn.close()
	hb := time.Duration(s.welcome.GetHeartbeatMs()) * time.Millisecond
	if hb <= 0 {
		hb = 20 * time.Second
	}
	go s.pinger(hb)
	for {
		s.conn.setReadDeadline(time.Now().Add(3 * hb))
		frame, err := s.conn.readFrame()
		if err != nil {
			if s.c.ctx.Err() == nil && s.stopped == nil {
				s.c.report(fmt.Errorf("client: connection lost: %w", err))
			}
			return
		}
		_, m, err := wire.Decode(frame)
		if err != nil {
			s.c.report(err)
			continue
		}
		s.handle(m)
	}
}

func (s *session) pinger(hb time.Duration) {
	t := time.NewTicker(hb)
	defer t.Stop()
	var nonce uint64
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			nonce++
			if err := s.write(&pb.Ping{Nonce: nonce}); err != nil {
				s.conn.close()
				return
			}
		}
	}
}

func (s *session) handle(m proto.Message) {
	switch m := m.(type) {
	case *pb.SendResult:
		s.c.onSendResult(s, m)
	case *pb.Error:
		err := wire.FromProto(m)
		if m.GetRequestId() != 0 && s.c.answer(m.GetRequestId(), m) {
			return
		}
		switch {
		case err.Code == pb.ErrorCode_SESSION_REPLACED:
			s.c.stoppedBy(s, ErrReplaced, err)
			return
		case err.Code == pb.ErrorCode_REVOKED && err.Fatal:
			s.c.stoppedBy(s, ErrRevoked, err)
			return
		case err.Code == pb.ErrorCode_TOKEN_EXPIRED:
			s.c.tokenExpired() // the reconnect asks RefreshToken first
		}
		s.c.report(err)
		if err.Code == pb.ErrorCode_FRAME_TOO_LARGE {
			s.c.onFrameTooLarge(s, err)
		}
		if err.Fatal {
			s.hint = time.Duration(err.RetryAfterMs) * time.Millisecond
			s.conn.close()
		}
	case *pb.Batch:
		s.c.toReceiver(event{s: s, batch: m})
	case *pb.PullResult:
		s.c.answer(m.GetRequestId(), m)
	case *pb.ReadResult:
		s.c.answer(m.GetRequestId(), m)
	case *pb.ReadCountResult:
		s.c.answer(m.GetRequestId(), m)
	case *pb.Summary:
		s.c.answer(m.GetRequestId(), m)
	case *pb.RefreshResult:
		s.c.refreshed(m) // before the reader reads on: a reconnect right after uses the new token
		s.c.answer(m.GetRequestId(), m)
	case *pb.Pong:
	}
}
