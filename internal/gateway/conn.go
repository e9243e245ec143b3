package gateway

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// outItem is one thing for a connection's writer: a frame body to encode, or
// transport bytes ready to go (WebSocket control frames).
type outItem struct {
	msg   proto.Message
	raw   []byte
	close bool // close the connection once this is written
}

// Conn is one client connection: a reader (this goroutine) that handles
// frames in order, and a writer goroutine that owns all writes.
type Conn struct {
	g    *Gateway
	nc   net.Conn
	tr   transport
	log  *zap.Logger
	json bool // the client spoke the JSON form in hello: answer in JSON

	id   auth.Identity
	kind string

	out      chan outItem // bounded; overflow disconnects (counted)
	done     chan struct{}
	once     sync.Once
	inflight atomic.Int32 // sends awaiting a result
	closing  bool         // a fatal frame is queued (reader goroutine only)
}

func newConn(g *Gateway, nc net.Conn, tr transport) *Conn {
	return &Conn{
		g:    g,
		nc:   nc,
		tr:   tr,
		log:  g.log.With(zap.String("remote", nc.RemoteAddr().String())),
		out:  make(chan outItem, g.opts.OutQueue),
		done: make(chan struct{}),
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
	select {
	case c.out <- it:
		return true
	default:
		c.g.metrics.overflows.Inc()
		c.log.Warn("outbound queue full; closing the connection", zap.Int64("uid", c.id.UID), zap.String("device", c.id.Device))
		c.close()
		return false
	}
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
	})
}

// serve runs the connection until it ends.
func (c *Conn) serve() {
	defer c.g.forget(c)
	defer c.close()
	go c.writeLoop()

	if !c.hello() {
		c.drainWriter()
		return
	}
	hb := c.g.opts.Heartbeat
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(3 * hb))
		frame, text, err := c.tr.readFrame()
		if err != nil {
			c.readFailed(err)
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
		if !c.handle(t, m) {
			c.drainWriter()
			return
		}
	}
}

func (c *Conn) readFailed(err error) {
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		// Framing is broken (huge length, unmasked WebSocket frame): the
		// stream cannot be resynchronised.
		c.fail(we, true)
		c.drainWriter()
	case isTimeout(err):
		c.g.metrics.timeouts.Inc()
		c.log.Debug("read deadline: peer silent for 3 heartbeats", zap.Int64("uid", c.id.UID), zap.String("device", c.id.Device))
	case errors.Is(err, io.EOF), errors.Is(err, errWSClosed), errors.Is(err, net.ErrClosed):
	default:
		c.log.Debug("read", zap.Error(err))
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

// hello reads and checks the first frame. It reports whether the session
// may go on.
func (c *Conn) hello() bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.g.opts.HelloTimeout))
	frame, text, err := c.tr.readFrame()
	if err != nil {
		c.readFailed(err)
		return false
	}
	c.json = text
	t, m, err := decode(frame, text)
	if err != nil {
		c.fail(err, true)
		return false
	}
	h, ok := m.(*pb.Hello)
	if !ok {
		c.fail(wire.Errorf(pb.ErrorCode_UNAUTHENTICATED, "the first frame must be hello, got %s", t), true)
		return false
	}
	id, err := c.g.verifier.Verify(h.GetToken())
	if err != nil {
		c.g.metrics.authFailures.Inc()
		c.fail(wire.Errorf(pb.ErrorCode_UNAUTHENTICATED, "%v", err), true)
		return false
	}
	switch h.GetDeviceKind() {
	case "", "mobile", "desktop", "web":
	default:
		c.fail(wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "device_kind %q: want mobile, desktop or web", h.GetDeviceKind()), true)
		return false
	}
	c.id, c.kind = id, h.GetDeviceKind()
	if c.kind == "" {
		c.kind = "desktop"
	}
	c.log = c.log.With(zap.Int64("uid", id.UID), zap.String("device", id.Device))
	c.g.metrics.handshakes.Inc()
	return c.enqueue(outItem{msg: &pb.Welcome{
		Uid:         id.UID,
		Device:      id.Device,
		Epoch:       c.g.epoch,
		HeartbeatMs: uint32(c.g.opts.Heartbeat / time.Millisecond),
		MaxFrame:    uint32(c.g.opts.MaxFrame),
		Server:      "inboxd/" + c.g.opts.ID,
	}})
}

// handle dispatches one client frame. It reports whether the session goes on.
func (c *Conn) handle(t wire.FrameType, m proto.Message) bool {
	switch m := m.(type) {
	case *pb.Ping:
		return c.enqueue(outItem{msg: &pb.Pong{Nonce: m.GetNonce()}})
	case *pb.Send:
		c.g.sends.submit(c, m)
		return true
	case *pb.Hello:
		c.fail(wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "hello was already received on this connection"), false)
		return true
	default:
		c.fail(wire.Errorf(pb.ErrorCode_NOT_IMPLEMENTED, "%s frames are not served by this gateway yet", t), false)
		return true
	}
}

// writeLoop owns the socket's write side: it encodes everything queued so
// far into one buffer and writes it with one syscall, under a deadline.
func (c *Conn) writeLoop() {
	defer c.close()
	var buf, scratch []byte
	for {
		var it outItem
		select {
		case it = <-c.out:
		case <-c.done:
			return
		}
		buf = buf[:0]
		closing := false
		for {
			var err error
			buf, scratch, err = c.encode(buf, scratch, it)
			if err != nil {
				c.log.Error("encode frame", zap.Error(err))
			}
			closing = closing || it.close
			if closing || len(buf) >= 64<<10 {
				break
			}
			select {
			case it = <-c.out:
				continue
			default:
			}
			break
		}
		if closing {
			if cf := c.tr.closeFrame("closing"); cf != nil {
				buf = append(buf, cf...)
			}
		}
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.g.opts.WriteTimeout))
		if _, err := c.nc.Write(buf); err != nil {
			if isTimeout(err) {
				c.g.metrics.timeouts.Inc()
			}
			return
		}
		if closing {
			return
		}
		if cap(buf) > 1<<20 { // do not keep a burst's buffer forever
			buf = nil
		}
	}
}

// encode appends one item in transport framing to buf.
func (c *Conn) encode(buf, scratch []byte, it outItem) ([]byte, []byte, error) {
	if it.raw != nil {
		return append(buf, it.raw...), scratch, nil
	}
	if it.msg == nil {
		return buf, scratch, nil
	}
	var err error
	if c.json {
		scratch, err = wire.MarshalJSONFrame(it.msg)
	} else {
		scratch, err = wire.AppendFrame(scratch[:0], it.msg)
	}
	if err != nil {
		return buf, scratch, err
	}
	buf = c.tr.appendHeader(buf, len(scratch), c.json)
	return append(buf, scratch...), scratch, nil
}

// validText reports whether s is valid UTF-8 without control characters
// other than tab and newline.
func validText(s string, allowNewlines bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 && !(allowNewlines && (r == '\n' || r == '\t')) || r == 0x7f {
			return false
		}
	}
	return true
}
