package gateway

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// tailCheckPings: a session re-reads its tail every this many pings.
const tailCheckPings = 6

// outItem is one thing for a connection's live lane: a frame body to
// encode, a live entry (an encoded pb.Message; consecutive ones share one
// Batch frame), or transport bytes ready to go (WebSocket control frames).
type outItem struct {
	msg     proto.Message
	live    []byte
	liveSeq uint64
	raw     []byte
	close   bool // close the connection once this is written
	// linger (with close): before closing, read for replacedLinger what
	// the client sent already (Conn.linger).
	linger bool
}

// Conn is one client connection: a reader (this goroutine) that handles
// frames in order, and a writer goroutine that owns all writes.
type Conn struct {
	g    *Gateway
	nc   net.Conn
	tr   transport
	json bool // the client spoke the JSON form in hello: answer in JSON
	// born is when the connection was accepted (unix ns): of two logins
	// of one device, the one that began later wins (router kicks).
	born int64

	id   auth.Identity // from the hello's token; a refresh changes only tokenIat and tokenExp
	kind string

	outMu    sync.Mutex
	out      []outItem   // live lane: control frames and live entries; bounded (OutQueue), overflow disconnects (counted)
	backfill chan *page  // backfill lane: at most the device's window of pages
	writing  atomic.Bool // a writer goroutine runs (started on demand, gone when both lanes are empty)
	sess     *session
	reqs     atomic.Int32 // requests (pull, read, …) in flight (a counter, not a channel: 96 bytes less per connection)
	done     chan struct{}
	once     sync.Once
	mu       sync.Mutex
	inflight atomic.Int32 // sends awaiting a result
	closing  bool         // a fatal frame is queued (reader goroutine only)
	pings    int          // pings received (reader goroutine only)

	// lingering: the connection was replaced and its last frame written;
	// the reader takes only confirmations until it closes (Conn.linger).
	lingering atomic.Bool

	// The current token (mu): the connection ends at tokenExp (expiry,
	// tokenlife.go) unless a refresh moves it; a revocation closes it when
	// it covers tokenIat.
	tokenIat, tokenExp time.Time
	expiry             *time.Timer

	// Parking (poller_linux.go): an idle logged-in connection has no
	// reader goroutine. fd is the socket's descriptor (-1: never parked);
	// state says whether a reader runs; lastRead is when the reader last
	// began to wait for a frame (unix ns), the start of the silence the
	// heartbeat limit measures; registered is the reader's (whoever runs
	// it) record that fd is in the epoll set.
	fd         int32
	state      atomic.Int32
	lastRead   atomic.Int64
	registered bool
}

// Conn.state: a reader goroutine runs, or the connection is parked.
const (
	connRunning int32 = iota
	connParked
)

func newConn(g *Gateway, nc net.Conn, tr transport) *Conn {
	return &Conn{
		g:        g,
		nc:       nc,
		tr:       tr,
		backfill: make(chan *page, 4),
		done:     make(chan struct{}),
		born:     time.Now().UnixNano(),
		fd:       -1,
	}
}

// enqueue hands an item to the writer without blocking. A full queue means
// the client does not read fast enough: the connection is closed (counted),
// never an item silently dropped; the client reconnects and resumes.
func (c *Conn) enqueue(it outItem) bool {
	select {
	case <-c.done:
		return false
	default:
	}
	c.outMu.Lock()
	if len(c.out) >= c.g.opts.OutQueue {
		c.outMu.Unlock()
		c.g.metrics.overflows.Inc()
		c.logger().Warn("outbound queue full; closing the connection (the device resumes from its cursor)",
			zap.Int64("uid", c.id.UID), zap.String("device", c.id.Device))
		c.close()
		return false
	}
	c.out = append(c.out, it)
	c.outMu.Unlock()
	c.kick()
	return true
}

// takeOut moves the queued live-lane items to dst.
func (c *Conn) takeOut(dst []outItem) []outItem {
	c.outMu.Lock()
	dst = append(dst, c.out...)
	// The queue is not kept: an idle connection holds none (up to 64
	// items of 80 bytes were kept before), for one allocation per batch of
	// live items, against the write system call that sends them.
	c.out = nil
	c.outMu.Unlock()
	return dst
}

func (c *Conn) outEmpty() bool {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	return len(c.out) == 0
}

// kick makes sure a writer runs. An idle connection has no writer
// goroutine and no write buffers: they are taken when there is something
// to write and given back when both lanes are empty.
func (c *Conn) kick() {
	if c.writing.CompareAndSwap(false, true) {
		go c.writeLoop()
	}
}

// enqueueBackfill hands a page to the writer. The session never has more
// pages out than its window, so this does not block for long.
func (c *Conn) enqueueBackfill(pg *page) bool {
	select {
	case c.backfill <- pg:
		c.kick()
		return true
	case <-c.done:
		putPage(pg)
		return false
	}
}

// replaced ends the connection because its device logged in elsewhere.
// Its last confirmations are still taken (linger): a client that closed
// and dialled again at once has its final ack in this socket, maybe not
// read yet, and the new login reads the cursor only after this session
// ended.
func (c *Conn) replaced() {
	c.g.metrics.replaced.Inc()
	c.enqueue(outItem{msg: &pb.Error{Code: pb.ErrorCode_SESSION_REPLACED,
		Message: "this device logged in on another connection", Fatal: true}, close: true, linger: true})
}

// replacedLinger is how long a replaced connection is read for the
// confirmations its client sent before it knew: what is in the socket
// already is read at once, and a loopback or LAN round trip fits. It is
// also the most a login of the device waits for a half-open connection it
// replaces (its peer is gone and says nothing).
const replacedLinger = 100 * time.Millisecond

// linger is the writer's end of a replaced connection, once its last frame
// is written: the reader (woken if parked) takes the confirmations the
// client sent already, until the client closes or replacedLinger passes;
// then the connection closes, and with it the session, which saves the
// cursor those confirmations moved.
func (c *Conn) linger() {
	c.lingering.Store(true)
	_ = c.nc.SetReadDeadline(time.Now().Add(replacedLinger))
	c.wake()
	t := time.NewTimer(replacedLinger + 20*time.Millisecond) // a reader that set a later deadline meanwhile, or is busy
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	}
	c.close()
}

// fail sends a protocol error; fatal errors close the connection after it.
func (c *Conn) fail(err error, fatal bool) {
	var we *wire.Error
	if !errors.As(err, &we) {
		we = wire.Errorf(pb.ErrorCode_INTERNAL, "internal error")
	}
	e := we.Proto()
	e.Fatal = fatal
	c.g.metrics.errors.WithLabelValues(e.Code.String()).Inc()
	c.closing = c.closing || fatal
	c.enqueue(outItem{msg: e, close: fatal})
}

func (c *Conn) close() {
	c.once.Do(func() {
		close(c.done)
		_ = c.nc.Close()
		c.stopExpiry()
		if s := c.session(); s != nil {
			s.close()
		}
		// A parked connection has no reader to see the close: give it one,
		// its read fails at once and it ends like any other.
		c.wake()
	})
}

// finish is the reader's last act: the connection is closed and forgotten.
func (c *Conn) finish() {
	c.close()
	c.g.forget(c)
}

// wake starts the reader of a parked connection again (readiness, close
// or shutdown); it does nothing for a running one.
func (c *Conn) wake() {
	if c.state.CompareAndSwap(connParked, connRunning) {
		c.g.poller.forget(c)
		go c.readLoop(false)
	}
}

// silent closes a parked connection that sent nothing for 3 heartbeats:
// what the read deadline does for a running reader.
func (c *Conn) silent() {
	if c.state.CompareAndSwap(connParked, connRunning) {
		c.g.poller.forget(c)
		go func() {
			c.g.metrics.timeouts.Inc()
			c.g.metrics.heartbeatTimeouts.Inc()
			c.logger().Debug("parked connection: peer silent for 3 heartbeats")
			c.finish()
		}()
	}
}

// serve runs the connection's login, then its reader.
func (c *Conn) serve() {
	// The login runs deep (tokens, JetStream, Postgres) on a goroutine of
	// its own: the stack it grows goes with it, and this reader, which
	// lives as long as the connection, idles on a small one.
	helloOK := make(chan bool, 1)
	go func() { helloOK <- c.hello() }()
	if !<-helloOK {
		c.drainWriter()
		c.finish()
		return
	}
	if c.g.poller != nil {
		c.fd = pollFD(c.nc)
	}
	c.readLoop(true)
}

// readLoop handles the client's frames in order until the connection ends,
// or until nothing is buffered and the connection parks: then it returns,
// and the poller runs it again when the socket is readable. One readLoop
// at most runs for a connection (Conn.state). A woken reader (mayPark
// false) reads before it may park again: the readiness that woke it is
// still there until it does.
func (c *Conn) readLoop(mayPark bool) {
	hb := c.g.opts.Heartbeat
	for ; ; mayPark = true {
		now := time.Now()
		c.lastRead.Store(now.UnixNano())
		lingering := c.lingering.Load()
		if mayPark && c.fd >= 0 && !c.closing && !lingering && c.tr.release() && c.g.poller.park(c) {
			return
		}
		if !lingering { // linger set the deadline
			_ = c.nc.SetReadDeadline(now.Add(3 * hb))
		}
		frame, text, err := c.tr.readFrame()
		if err != nil {
			c.readFailed(err, true)
			c.finish()
			return
		}
		c.g.metrics.framesIn.Inc()
		t, m, err := decode(frame, text)
		if err != nil {
			// A frame that parsed at the transport level but not inside is
			// answered and skipped: the stream itself is still in sync.
			c.fail(err, false)
			continue
		}
		if c.lingering.Load() {
			// Replaced: only confirmations still count. Anything else
			// (a send, a pull) is answered on the client's next
			// connection, which it makes anyway; its writer is done here.
			switch m.(type) {
			case *pb.Ack, *pb.AckRange:
				c.handle(t, m)
			}
			continue
		}
		c.waitRoom()
		if !c.handle(t, m) {
			c.drainWriter()
			c.finish()
			return
		}
	}
}

// waitRoom holds the reader while the outbound queue is more than half
// full. A client's own frames (pings, requests) are then read no faster
// than their answers are written: a client that pipelines thousands of
// pings while reading its pongs is slowed to the writer's pace instead of
// being closed as slow, and live entries keep the other half of the queue.
// A client that reads nothing is still closed: by the writer's deadline,
// or as slow once live entries fill the queue. The wait polls: it only
// happens under a flood, and an idle connection pays nothing for it.
func (c *Conn) waitRoom() {
	for c.outLen() > c.g.opts.OutQueue/2 && !c.isClosed() {
		time.Sleep(time.Millisecond)
	}
}

func (c *Conn) outLen() int {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	return len(c.out)
}

// readFailed handles a failed read: before the login (loggedIn false) a
// deadline is the hello timeout, after it the peer was silent for 3
// heartbeats (half-open detection); each has its counter.
func (c *Conn) readFailed(err error, loggedIn bool) {
	var we *wire.Error
	switch {
	case c.lingering.Load():
		// The end of a replaced connection's linger: expected.
	case errors.As(err, &we):
		// Framing is broken (huge length, unmasked WebSocket frame): the
		// stream cannot be resynchronised.
		c.fail(we, true)
		c.drainWriter()
	case isTimeout(err) && loggedIn:
		c.g.metrics.timeouts.Inc()
		c.g.metrics.heartbeatTimeouts.Inc()
		c.logger().Debug("read deadline: peer silent for 3 heartbeats")
	case isTimeout(err):
		c.g.metrics.timeouts.Inc()
		c.g.metrics.helloTimeouts.Inc()
		c.logger().Debug("no hello within the hello timeout")
	case errors.Is(err, io.EOF), errors.Is(err, errWSClosed), errors.Is(err, net.ErrClosed):
	default:
		c.logger().Debug("read", zap.Error(err))
	}
}

// drainWriter gives the writer a moment to send a queued fatal error frame
// before the connection closes.
func (c *Conn) drainWriter() {
	if !c.closing {
		return
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-c.done:
	case <-t.C:
	}
}

func decode(frame []byte, text bool) (wire.FrameType, proto.Message, error) {
	var (
		t   wire.FrameType
		m   proto.Message
		err error
	)
	if text {
		t, m, err = wire.UnmarshalJSONFrame(frame)
	} else {
		t, m, err = wire.Decode(frame)
	}
	if err != nil {
		return 0, nil, err
	}
	if !t.FromClient() {
		return 0, nil, wire.Errorf(pb.ErrorCode_UNKNOWN_TYPE, "%s frames are sent by the server, not by clients", t)
	}
	return t, m, nil
}

// logger returns the gateway's logger with this connection's fields. It
// is built when something is logged (rarely): a logger per connection
// would cost an idle connection about a kilobyte.
func (c *Conn) logger() *zap.Logger {
	return c.g.log.With(zap.String("remote", c.nc.RemoteAddr().String()), zap.Int64("uid", c.id.UID), zap.String("device", c.id.Device))
}

func (c *Conn) session() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess
}

func (c *Conn) setSession(s *session) {
	c.mu.Lock()
	c.sess = s
	c.mu.Unlock()
}

func (c *Conn) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// handle dispatches one client frame. It reports whether the session goes on.
func (c *Conn) handle(t wire.FrameType, m proto.Message) bool {
	if c.overRequestRate(t, m) {
		return true
	}
	switch m := m.(type) {
	case *pb.Ping:
		// Every few heartbeats, re-read the tail: a live announcement lost
		// without the gateway noticing (it is core NATS, at most once)
		// then delays a message by minutes, never for good.
		c.pings++
		if c.pings%tailCheckPings == 0 {
			c.session().tailCheck()
		}
		return c.enqueue(outItem{msg: &pb.Pong{Nonce: m.GetNonce()}})
	case *pb.Send:
		c.g.sends.submit(c, m)
		return true
	case *pb.Ack:
		if err := c.session().onAck(m.GetBatchIds(), m.GetSeqs()); err != nil {
			c.fail(err, false)
		}
		return true
	case *pb.AckRange:
		if err := c.session().onAckRange(m.GetUpToSeq()); err != nil {
			c.fail(err, false)
		}
		return true
	case *pb.SummaryRequest:
		c.handleSummaryRequest(m)
		return true
	case *pb.Pull:
		c.handlePull(m)
		return true
	case *pb.Read:
		c.handleRead(m)
		return true
	case *pb.ReadCount:
		c.handleReadCount(m)
		return true
	case *pb.Refresh:
		c.handleRefresh(m)
		return true
	case *pb.Hello:
		c.fail(wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "hello was already received on this connection"), false)
		return true
	default:
		c.fail(wire.Errorf(pb.ErrorCode_NOT_IMPLEMENTED, "%s frames are not served by this gateway yet", t), false)
		return true
	}
}
