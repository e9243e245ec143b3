package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/internal/config"
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

func TestBadInputGetsClearErrors(t *testing.T) {
	n := testnode.AllInOne(t)
	addr := n.Gateway.TCPAddr()

	t.Run("first frame not hello", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.write(&pb.Ping{Nonce: 1})
		c.expectError(pb.ErrorCode_UNAUTHENTICATED, true)
	})
	t.Run("forged token", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.write(&pb.Hello{Token: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"})
		c.expectError(pb.ErrorCode_UNAUTHENTICATED, true)
	})
	t.Run("unknown device kind", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.write(&pb.Hello{Token: testenv.Token(t, 1, "d"), DeviceKind: "toaster"})
		c.expectError(pb.ErrorCode_INVALID_ARGUMENT, true)
	})
	t.Run("huge length prefix", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.hello(1)
		c.writeRaw([]byte{0xff, 0xff, 0xff, 0xff})
		c.expectError(pb.ErrorCode_FRAME_TOO_LARGE, true)
	})
	t.Run("length below the header", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.hello(1)
		c.writeRaw([]byte{0, 0, 0, 1, 1})
		c.expectError(pb.ErrorCode_BAD_FRAME, true)
	})
	t.Run("recoverable frames keep the session", func(t *testing.T) {
		c := dialRaw(t, addr)
		c.hello(1)
		c.writeFrame([]byte{2, byte(wire.TypePing)}) // version 2
		c.expectError(pb.ErrorCode_UNSUPPORTED_VERSION, false)
		c.writeFrame([]byte{1, 99}) // unknown type
		c.expectError(pb.ErrorCode_UNKNOWN_TYPE, false)
		c.writeFrame([]byte{1, byte(wire.TypeSend), 0xff, 0xff}) // bad protobuf
		c.expectError(pb.ErrorCode_BAD_FRAME, false)
		c.writeFrame([]byte{1, byte(wire.TypeWelcome)}) // a server frame
		c.expectError(pb.ErrorCode_UNKNOWN_TYPE, false)
		c.write(&pb.Hello{Token: testenv.Token(t, 1, "raw")})
		c.expectError(pb.ErrorCode_INVALID_ARGUMENT, false)
		c.write(&pb.Ping{Nonce: 42})
		if p, ok := c.read().(*pb.Pong); !ok || p.Nonce != 42 {
			t.Fatalf("ping after errors: %v", p)
		}
	})
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

// More bad input after hello: each gets its coded answer and changes
// nothing; the session goes on.
func TestBadRequestsAfterHello(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	c := dialRaw(t, n.Gateway.TCPAddr())
	c.hello(1)
	expect := func(code pb.ErrorCode) {
		t.Helper()
		for {
			m := c.read()
			switch m := m.(type) {
			case *pb.Error:
				if m.Code != code || m.Fatal {
					t.Fatalf("got error %v, want %s (not fatal)", m, code)
				}
				return
			case *pb.SendResult:
				if m.Status != pb.SendStatus_REJECTED || m.Code != code {
					t.Fatalf("got %v, want REJECTED %s", m, code)
				}
				return
			case nil:
				t.Fatal("connection closed")
			}
			// batches (live copies), pongs: skip
		}
	}
	c.write(&pb.Send{ClientMsgId: "k-1", ConvId: conv, Kind: 7, Text: "what kind?"})
	expect(pb.ErrorCode_INVALID_ARGUMENT)
	c.write(&pb.Ack{BatchIds: []uint64{999}})
	expect(pb.ErrorCode_INVALID_ARGUMENT)
	c.write(&pb.Ack{Seqs: []uint64{123456}})
	expect(pb.ErrorCode_INVALID_ARGUMENT)
	c.write(&pb.AckRange{UpToSeq: 1 << 60})
	expect(pb.ErrorCode_INVALID_ARGUMENT)
	c.write(&pb.Pull{RequestId: 1, ConvId: conv, AfterConvSeq: -5})
	expect(pb.ErrorCode_INVALID_ARGUMENT)
	c.write(&pb.Pull{RequestId: 2, ConvId: conv, Limit: 500})
	expect(pb.ErrorCode_INVALID_ARGUMENT)
	c.write(&pb.Read{RequestId: 3, ConvId: -1})
	expect(pb.ErrorCode_INVALID_ARGUMENT)
	c.write(&pb.Ping{Nonce: 7})
	for {
		if p, ok := c.read().(*pb.Pong); ok {
			if p.Nonce != 7 {
				t.Fatalf("pong %d", p.Nonce)
			}
			break
		}
	}
	if got := count(t, n, `SELECT count(*) FROM msg_content`); got != 0 {
		t.Fatalf("%d messages stored by bad requests", got)
	}
}

// A WebSocket client frame that is not masked breaks the protocol: the
// connection is told BAD_FRAME and closed.
func TestUnmaskedWebSocketFrameRefused(t *testing.T) {
	n := testnode.AllInOne(t)
	nc, br, _, err := ws.Dial(context.Background(), n.Gateway.WSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	f, _ := wire.AppendFrame(nil, &pb.Hello{Token: testenv.Token(t, 1, "d")})
	// ws.WriteFrame with an unmasked frame, as a server would send it.
	if err := ws.WriteFrame(nc, ws.NewBinaryFrame(f)); err != nil {
		t.Fatal(err)
	}
	var r io.Reader = nc
	if br != nil {
		r = br
	}
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	msg, _, err := wsutil.ReadServerData(struct {
		io.Reader
		io.Writer
	}{r, nc})
	if err != nil {
		t.Fatal(err)
	}
	_, m, err := wire.Decode(msg)
	if e, ok := m.(*pb.Error); err != nil || !ok || e.Code != pb.ErrorCode_BAD_FRAME || !e.Fatal {
		t.Fatalf("got %v %v, want fatal BAD_FRAME", m, err)
	}
}
