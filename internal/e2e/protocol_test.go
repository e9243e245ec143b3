package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// rawTCP speaks the wire protocol by hand, to send what no well-behaved
// client would.
type rawTCP struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawTCP {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawTCP{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *rawTCP) writeRaw(b []byte) {
	c.t.Helper()
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *rawTCP) writeFrame(frame []byte) {
	c.t.Helper()
	c.writeRaw(append(binary.BigEndian.AppendUint32(nil, uint32(len(frame))), frame...))
}

func (c *rawTCP) write(m proto.Message) {
	c.t.Helper()
	f, err := wire.AppendFrame(nil, m)
	if err != nil {
		c.t.Fatal(err)
	}
	c.writeFrame(f)
}

// read returns the next frame's message, or nil when the connection closed.
func (c *rawTCP) read() proto.Message {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	f, err := wire.ReadTCPFrame(c.r, nil, 1<<20)
	if err == io.EOF || err != nil && strings.Contains(err.Error(), "reset") {
		return nil
	}
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	_, m, err := wire.Decode(f)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

func (c *rawTCP) expectError(code pb.ErrorCode, fatal bool) {
	c.t.Helper()
	m := c.read()
	e, ok := m.(*pb.Error)
	if !ok || e.Code != code || e.Fatal != fatal {
		c.t.Fatalf("got %T %v, want error %s (fatal %v)", m, m, code, fatal)
	}
	if fatal {
		if m := c.read(); m != nil {
			c.t.Fatalf("connection still open after a fatal error: %v", m)
		}
	}
}

func (c *rawTCP) hello(uid int64) *pb.Welcome {
	c.t.Helper()
	c.write(&pb.Hello{Token: testenv.Token(c.t, uid, "raw"), DeviceKind: "desktop"})
	w, ok := c.read().(*pb.Welcome)
	if !ok {
		c.t.Fatal("no welcome")
	}
	return w
}

func TestSilentConnectionClosedAfterThreeHeartbeats(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.Heartbeat = time.Second
	n := testnode.StartNode(t, cfg, config.RoleEmbeddedNATS|config.RoleGateway|config.RoleFanout|config.RoleSyncer)
	c := dialRaw(t, n.Gateway.TCPAddr())
	w := c.hello(1)
	if w.HeartbeatMs != 1000 {
		t.Fatalf("advertised heartbeat %d ms", w.HeartbeatMs)
	}
	start := time.Now()
	// Stay silent: the server must give up on us.
	if m := c.read(); m != nil {
		t.Fatalf("unexpected frame %v", m)
	}
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("closed after %s, before three heartbeats", d)
	}
	for deadline := time.Now().Add(5 * time.Second); n.Gateway.Connections() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still tracked", n.Gateway.Connections())
		}
	}
}

// The JSON form on WebSocket text frames, for debugging with any WebSocket
// tool: the server answers in JSON too.
func TestJSONFormOverWebSocket(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 5, 6)
	nc, _, _, err := ws.Dial(context.Background(), n.Gateway.WSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	send := func(s string) {
		if err := wsutil.WriteClientText(nc, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() wire.JSONFrame {
		_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		b, op, err := wsutil.ReadServerData(nc)
		if err != nil || op != ws.OpText {
			t.Fatalf("read: op %v err %v", op, err)
		}
		var f wire.JSONFrame
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return f
	}
	send(`{"v":1,"type":"hello","body":{"token":"` + testenv.Token(t, 5, "browser") + `","device_kind":"web"}}`)
	if f := read(); f.Type != "welcome" {
		t.Fatalf("got %+v", f)
	}
	send(`{"v":1,"type":"send","body":{"client_msg_id":"j-1","conv_id":"` + strconv.FormatInt(conv, 10) + `","text":"from json"}}`)
	f := read()
	for f.Type == "batch" { // the sender's own devices get the message too, live
		f = read()
	}
	var res struct {
		Status  string `json:"status"`
		ConvSeq string `json:"conv_seq"`
	}
	_ = json.Unmarshal(f.Body, &res)
	if f.Type != "send_result" || res.Status != "STORED" || res.ConvSeq != "1" {
		t.Fatalf("got %s %s", f.Type, f.Body)
	}
}

// wireConn speaks the wire protocol by hand over either transport, to send
// what no well-behaved client would: raw TCP ("tcp"), WebSocket binary
// messages ("ws"), or WebSocket text messages in the JSON form ("json").
type wireConn struct {
	t    *testing.T
	tr   string
	nc   net.Conn
	r    *bufio.Reader
	wait time.Duration // for a frame from the server (default 10 s)
}

// transports are those every row of a table runs on unless it says.
var transports = []string{"tcp", "ws"}

func dialWire(t *testing.T, n *node.Node, tr string) *wireConn {
	t.Helper()
	c := &wireConn{t: t, tr: tr}
	var err error
	switch tr {
	case "tcp":
		c.nc, err = net.Dial("tcp", n.Gateway.TCPAddr())
		if err == nil {
			c.r = bufio.NewReader(c.nc)
		}
	case "ws", "json":
		var br *bufio.Reader
		c.nc, br, _, err = ws.Dial(ctxT(t, 10*time.Second), n.Gateway.WSURL())
		if c.r = br; err == nil && br == nil {
			c.r = bufio.NewReader(c.nc)
		}
	default:
		t.Fatalf("transport %q", tr)
	}
	if err != nil {
		t.Fatalf("dial %s: %v", tr, err)
	}
	t.Cleanup(func() { c.nc.Close() })
	return c
}

// raw writes bytes as they are, below the framing.
func (c *wireConn) raw(b []byte) {
	c.t.Helper()
	_ = c.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// frame writes one frame in the connection's framing: a length prefix on
// TCP, one masked binary (ws) or text (json) message on WebSocket.
func (c *wireConn) frame(f []byte) {
	c.t.Helper()
	c.raw(c.framed(f))
}

func (c *wireConn) framed(f []byte) []byte {
	switch c.tr {
	case "tcp":
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(f))), f...)
	case "ws":
		return wsFrame(ws.OpBinary, true, true, f)
	}
	return wsFrame(ws.OpText, true, true, f)
}

// send writes m as a frame (its JSON form on a json connection).
func (c *wireConn) send(m proto.Message) {
	c.t.Helper()
	c.raw(c.encode(m))
}

// encode is m as send writes it.
func (c *wireConn) encode(m proto.Message) []byte {
	c.t.Helper()
	var f []byte
	var err error
	if c.tr == "json" {
		f, err = wire.MarshalJSONFrame(m)
	} else {
		f, err = wire.AppendFrame(nil, m)
	}
	if err != nil {
		c.t.Fatal(err)
	}
	return c.framed(f)
}

// wsFrame is one WebSocket frame (RFC 6455 5.2): a client's is masked.
func wsFrame(op ws.OpCode, fin, masked bool, payload []byte) []byte {
	h := ws.Header{Fin: fin, OpCode: op, Masked: masked, Length: int64(len(payload))}
	p := slices.Clone(payload)
	if masked {
		h.Mask = ws.NewMask()
		ws.Cipher(p, h.Mask, 0)
	}
	var b bytes.Buffer
	_ = ws.WriteHeader(&b, h)
	b.Write(p)
	return b.Bytes()
}

// next returns the server's next frame, or nil once the connection closed.
// Nothing within the wait fails the test.
func (c *wireConn) next() proto.Message {
	c.t.Helper()
	m, timedOut := c.nextOrTimeout()
	if timedOut {
		c.t.Fatalf("%s: no frame from the server within %s", c.tr, c.waitFor())
	}
	return m
}

func (c *wireConn) waitFor() time.Duration {
	if c.wait > 0 {
		return c.wait
	}
	return 10 * time.Second
}

// nextOrTimeout is next that reports a wait that ran out instead of
// failing the test.
func (c *wireConn) nextOrTimeout() (proto.Message, bool) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(c.waitFor()))
	for {
		var f []byte
		var text bool
		var err error
		if c.tr == "tcp" {
			f, err = wire.ReadTCPFrame(c.r, nil, 1<<20)
		} else {
			f, text, err = c.readWS()
		}
		if isTimeout(err) {
			return nil, true
		}
		if err != nil {
			return nil, false // closed (EOF, reset, a close frame): what follows a fatal error
		}
		if f == nil {
			continue // a control frame
		}
		var m proto.Message
		if text {
			_, m, err = wire.UnmarshalJSONFrame(f)
		} else {
			_, m, err = wire.Decode(f)
		}
		if err != nil {
			c.t.Fatalf("%s: the server sent a frame this client cannot read: %v", c.tr, err)
		}
		return m, false
	}
}

// readWS reads one server message: nil for a control frame, an error for
// a close frame.
func (c *wireConn) readWS() ([]byte, bool, error) {
	h, err := ws.ReadHeader(c.r)
	if err != nil {
		return nil, false, err
	}
	p := make([]byte, h.Length)
	if _, err := io.ReadFull(c.r, p); err != nil {
		return nil, false, err
	}
	switch h.OpCode {
	case ws.OpClose:
		return nil, false, io.EOF
	case ws.OpText:
		return p, true, nil
	case ws.OpBinary:
		return p, false, nil
	}
	return nil, false, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// reply is the next frame other than a batch (an empty backfill end comes
// after every welcome; a row's connection has no messages of its own).
func (c *wireConn) reply() proto.Message {
	c.t.Helper()
	for {
		if m := c.next(); m == nil {
			return nil
		} else if _, batch := m.(*pb.Batch); !batch {
			return m
		}
	}
}

// replyOrTimeout is reply that reports a wait that ran out.
func (c *wireConn) replyOrTimeout() (proto.Message, bool) {
	c.t.Helper()
	for {
		m, timedOut := c.nextOrTimeout()
		if _, batch := m.(*pb.Batch); !batch || timedOut {
			return m, timedOut
		}
	}
}

// hello logs in as uid's device; it fails the test without a welcome.
func (c *wireConn) hello(uid int64, device string) *pb.Welcome {
	c.t.Helper()
	c.send(&pb.Hello{Token: testenv.Token(c.t, uid, device), DeviceKind: "desktop"})
	w, ok := c.reply().(*pb.Welcome)
	if !ok {
		c.t.Fatalf("%s: no welcome for %d/%s", c.tr, uid, device)
	}
	return w
}

// pong pings and returns an error unless the pong is the next answer: the
// session goes on, and nothing else was answered before it.
func (c *wireConn) pong(nonce uint64) error {
	c.t.Helper()
	c.send(&pb.Ping{Nonce: nonce})
	switch m := c.reply().(type) {
	case *pb.Pong:
		if m.Nonce != nonce {
			return fmt.Errorf("pong %d, want %d", m.Nonce, nonce)
		}
		return nil
	case nil:
		return errors.New("connection closed instead of a pong")
	default:
		return fmt.Errorf("got %T %v before the pong", m, m)
	}
}

// outcome is a documented answer to input a client should not send.
type outcome struct {
	code      pb.ErrorCode
	fatal     bool   // an error frame, then the server closes the connection
	closed    bool   // closed with no answer (nothing to answer: the stream ended mid-frame)
	rejected  bool   // a send_result REJECTED with code (a send's answer)
	requestID uint64 // the error answers the request with this id
	none      bool   // no answer at all, nothing changes
}

func fatalErr(code pb.ErrorCode) outcome { return outcome{code: code, fatal: true} }
func errFrame(code pb.ErrorCode) outcome { return outcome{code: code} }
func rejected(code pb.ErrorCode) outcome { return outcome{code: code, rejected: true} }
func reqErr(code pb.ErrorCode, id uint64) outcome {
	return outcome{code: code, requestID: id}
}

var (
	closedQuietly = outcome{closed: true}
	noAnswer      = outcome{none: true}
)

func (o outcome) String() string {
	switch {
	case o.closed:
		return "the connection closed"
	case o.none:
		return "no answer"
	case o.rejected:
		return "send_result REJECTED " + o.code.String()
	case o.fatal:
		return "fatal error " + o.code.String() + ", then the connection closed"
	case o.requestID != 0:
		return fmt.Sprintf("error %s for request %d, session goes on", o.code, o.requestID)
	}
	return "error " + o.code.String() + ", session goes on"
}

// expect returns an error unless the connection's next answer is o; after
// an answer that is not fatal the session must go on (a ping is answered).
func (c *wireConn) expect(o outcome) error {
	c.t.Helper()
	if o.none {
		return c.pong(7001)
	}
	m := c.reply()
	if o.closed {
		if m != nil {
			return fmt.Errorf("got %T %v, want the connection closed", m, m)
		}
		return nil
	}
	switch m := m.(type) {
	case *pb.Error:
		if o.rejected || m.Code != o.code || m.Fatal != o.fatal || m.RequestId != o.requestID {
			return fmt.Errorf("got error %v, want %s", m, o)
		}
		if m.Message == "" {
			return fmt.Errorf("error %s says nothing", m.Code)
		}
	case *pb.SendResult:
		if !o.rejected || m.Status != pb.SendStatus_REJECTED || m.Code != o.code {
			return fmt.Errorf("got send_result %v, want %s", m, o)
		}
	case nil:
		return fmt.Errorf("connection closed, want %s", o)
	default:
		return fmt.Errorf("got %T %v, want %s", m, m, o)
	}
	if o.fatal {
		if m := c.next(); m != nil {
			return fmt.Errorf("after the fatal error the connection is still open: got %T %v", m, m)
		}
		return nil
	}
	return c.pong(7002)
}
