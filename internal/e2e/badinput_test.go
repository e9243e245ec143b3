package e2e

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// Bad input, kind by kind, over raw TCP, WebSocket and the JSON form: each
// gets its documented answer (docs/protocol.md, "Errors") or a closed
// connection, and the server is unaffected, checked after every row: the
// connection is forgotten, a new login works, the stored data and a
// victim's client are as they were, and a bystander pair on the same
// gateway exchanged live messages all along, none lost, in order, each
// within a liveness bound (their latencies are logged, not asserted).
func TestBadInputTable(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	d := config.Defaults()
	// The production limits: the floods must meet them.
	cfg.PullRate, cfg.SendRate, cfg.SendEntryRate, cfg.RequestRate = d.PullRate, d.SendRate, d.SendEntryRate, d.RequestRate
	n := testnode.StartNode(t, cfg, allRoles)

	const attacker, victim, other = 7, 8, 9
	convA := createConv(t, n, false, attacker, victim) // the attacker's sends go here: the victim must get none
	convG := createConv(t, n, true, attacker, other)   // the floods read here
	convN := createConv(t, n, false, victim, other)    // not the attacker's
	sendN(t, n, other, convG, 1, "g")
	ctx := ctxT(t, 2*time.Minute)
	if _, err := dial(t, n, "tcp", attacker, "setup").Read(ctx, convG, 1); err != nil {
		t.Fatal(err) // read once, so that the flood's reads change nothing and their read_sync is a repeat
	}
	entries := testenv.InboxEntries(t, testnode.Admin(t, n), testnode.Layout(), attacker)
	lastSeq := entries[len(entries)-1].Seq
	v := connectWitness(t, n, victim, "v")
	by := startBystander(t, n, 100, 101)
	w := newWatch(t, n, by.conv, []int64{attacker, victim, other}, "8/v")
	w.settle(t)

	// Frames as bytes, to cut, spoil and mislabel.
	frame := func(m proto.Message) []byte { f, _ := wire.AppendFrame(nil, m); return f }
	typed := func(t wire.FrameType, body ...byte) []byte { return append([]byte{wire.Version, byte(t)}, body...) }
	badUTF8Send := typed(wire.TypeSend, protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "u-1")...)
	badUTF8Send = protowire.AppendVarint(protowire.AppendTag(badUTF8Send, 2, protowire.VarintType), uint64(convA))
	badUTF8Send = protowire.AppendBytes(protowire.AppendTag(badUTF8Send, 4, protowire.BytesType), []byte("bad \xff text"))
	const maxFrame = wire.DefaultMaxFrame // the gateway's, advertised in welcome
	tcpLen := func(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }
	huge := map[string][]byte{"tcp": tcpLen(0xffffffff), "ws": wsFrameHeader(ws.Header{Fin: true, OpCode: ws.OpBinary, Masked: true, Length: 1 << 40})}
	send := func(change func(*pb.Send)) *pb.Send {
		s := &pb.Send{ClientMsgId: "bad-1", ConvId: convA, Text: "never stored"}
		change(s)
		return s
	}

	rows := []struct {
		name  string
		pre   bool // the input comes instead of a hello
		input func(c *wireConn)
		want  map[string]outcome // the transports the row runs on, with each's documented answer
		flood func(c *wireConn) error
	}{
		// Instead of a hello.
		{name: "first frame not hello", pre: true, input: func(c *wireConn) { c.send(&pb.Ping{Nonce: 1}) }, want: all3(fatalErr(pb.ErrorCode_UNAUTHENTICATED))},
		{name: "hello with a token that is none", pre: true, input: func(c *wireConn) { c.send(&pb.Hello{Token: "not.a.token"}) }, want: all3(fatalErr(pb.ErrorCode_UNAUTHENTICATED))},
		{name: "hello with an unknown device kind", pre: true, input: func(c *wireConn) {
			c.send(&pb.Hello{Token: testenv.Token(t, attacker, "k"), DeviceKind: "toaster"})
		}, want: all3(fatalErr(pb.ErrorCode_INVALID_ARGUMENT))},
		{name: "bad protobuf instead of a hello", pre: true, input: func(c *wireConn) { c.frame(typed(wire.TypeHello, 0xff, 0xff)) }, want: both(fatalErr(pb.ErrorCode_BAD_FRAME))},
		{name: "oversized frame instead of a hello", pre: true, input: func(c *wireConn) { c.raw(huge[c.tr]) }, want: both(fatalErr(pb.ErrorCode_FRAME_TOO_LARGE))},
		{name: "bad JSON instead of a hello", pre: true, input: func(c *wireConn) { c.frame([]byte(`{"v":1,"type":"hello","body":{`)) }, want: only("json", fatalErr(pb.ErrorCode_BAD_FRAME))},

		// Framing.
		{name: "oversized frame: a length of 4 GiB or 1 TiB", input: func(c *wireConn) { c.raw(huge[c.tr]) }, want: both(fatalErr(pb.ErrorCode_FRAME_TOO_LARGE))},
		{name: "oversized frame: one byte over max_frame, sent whole", input: func(c *wireConn) {
			c.frame(typed(wire.TypePing, make([]byte, maxFrame-1)...))
		}, want: both(fatalErr(pb.ErrorCode_FRAME_TOO_LARGE))},
		{name: "oversized frame: fragments adding up to more than max_frame", input: func(c *wireConn) {
			half := make([]byte, maxFrame/2+1)
			c.raw(append(wsFrame(ws.OpBinary, false, true, half), wsFrame(ws.OpContinuation, true, true, half)...))
		}, want: only("ws", fatalErr(pb.ErrorCode_FRAME_TOO_LARGE))},
		{name: "truncated frame, then the stream ends", input: func(c *wireConn) {
			f := c.framed(frame(&pb.Send{ClientMsgId: "cut", ConvId: convA, Text: strings.Repeat("x", 100)}))
			c.raw(f[:len(f)-50])
			halfClose(c)
		}, want: both(closedQuietly)},
		{name: "frame shorter than its header", input: func(c *wireConn) { c.frame([]byte{wire.Version}) },
			want: split(fatalErr(pb.ErrorCode_BAD_FRAME), errFrame(pb.ErrorCode_BAD_FRAME))}, // TCP: the length prefix itself is wrong; WebSocket: the message is
		{name: "empty frame", input: func(c *wireConn) { c.frame(nil) },
			want: split(fatalErr(pb.ErrorCode_BAD_FRAME), errFrame(pb.ErrorCode_BAD_FRAME))},
		{name: "unsupported version", input: func(c *wireConn) { c.frame([]byte{2, byte(wire.TypePing)}) }, want: both(errFrame(pb.ErrorCode_UNSUPPORTED_VERSION))},
		{name: "unknown frame type", input: func(c *wireConn) { c.frame([]byte{wire.Version, 99}) }, want: both(errFrame(pb.ErrorCode_UNKNOWN_TYPE))},
		{name: "a server's frame type from a client", input: func(c *wireConn) { c.frame(frame(&pb.Welcome{Uid: victim})) }, want: both(errFrame(pb.ErrorCode_UNKNOWN_TYPE))},
		{name: "bad protobuf", input: func(c *wireConn) { c.frame(typed(wire.TypeSend, 0xff, 0xff)) }, want: both(errFrame(pb.ErrorCode_BAD_FRAME))},
		{name: "truncated protobuf", input: func(c *wireConn) {
			f := frame(&pb.Send{ClientMsgId: "cut-body", ConvId: convA, Text: "cut short"})
			c.frame(f[:len(f)-3])
		}, want: both(errFrame(pb.ErrorCode_BAD_FRAME))},
		{name: "bad UTF-8 in a protobuf string", input: func(c *wireConn) { c.frame(badUTF8Send) }, want: both(errFrame(pb.ErrorCode_BAD_FRAME))},
		{name: "a second hello", input: func(c *wireConn) { c.send(&pb.Hello{Token: testenv.Token(t, victim, "v")}) }, want: all3(errFrame(pb.ErrorCode_INVALID_ARGUMENT))},

		// WebSocket framing.
		{name: "unmasked frame", input: func(c *wireConn) { c.raw(wsFrame(ws.OpBinary, true, false, frame(&pb.Ping{Nonce: 1}))) }, want: only("ws", fatalErr(pb.ErrorCode_BAD_FRAME))},
		{name: "reserved bits set", input: func(c *wireConn) {
			c.raw(wsFrameHeader(ws.Header{Fin: true, Rsv: ws.Rsv(true, false, false), OpCode: ws.OpBinary, Masked: true, Length: 0}))
		}, want: only("ws", fatalErr(pb.ErrorCode_BAD_FRAME))},
		{name: "continuation without a first frame", input: func(c *wireConn) { c.raw(wsFrame(ws.OpContinuation, true, true, frame(&pb.Ping{}))) }, want: only("ws", fatalErr(pb.ErrorCode_BAD_FRAME))},
		{name: "data frame inside a fragmented message", input: func(c *wireConn) {
			f := frame(&pb.Ping{Nonce: 3})
			c.raw(append(wsFrame(ws.OpBinary, false, true, f[:1]), wsFrame(ws.OpBinary, true, true, f[1:])...))
		}, want: only("ws", fatalErr(pb.ErrorCode_BAD_FRAME))},
		{name: "control frame over 125 bytes", input: func(c *wireConn) { c.raw(wsFrame(ws.OpPing, true, true, make([]byte, 126))) }, want: only("ws", fatalErr(pb.ErrorCode_BAD_FRAME))},

		// The JSON form (WebSocket text messages).
		{name: "text that is not JSON", input: func(c *wireConn) { c.frame([]byte("hello?")) }, want: only("json", errFrame(pb.ErrorCode_BAD_FRAME))},
		{name: "bad UTF-8 in a JSON string", input: func(c *wireConn) {
			c.frame([]byte(`{"v":1,"type":"send","body":{"client_msg_id":"j","conv_id":"` + strconv.FormatInt(convA, 10) + "\",\"text\":\"bad \xff\"}}"))
		}, want: only("json", errFrame(pb.ErrorCode_BAD_FRAME))},
		{name: "bad UTF-8 in a text message outside the body", input: func(c *wireConn) {
			c.frame([]byte("{\"v\":1,\"type\":\"ping\",\"body\":{\"nonce\":\"5\"},\"x\":\"\xff\"}"))
		}, want: only("json", errFrame(pb.ErrorCode_BAD_FRAME))},
		{name: "JSON of another version", input: func(c *wireConn) { c.frame([]byte(`{"v":2,"type":"ping","body":{}}`)) }, want: only("json", errFrame(pb.ErrorCode_UNSUPPORTED_VERSION))},
		{name: "JSON of an unknown type", input: func(c *wireConn) { c.frame([]byte(`{"v":1,"type":"shout","body":{}}`)) }, want: only("json", errFrame(pb.ErrorCode_UNKNOWN_TYPE))},
		{name: "JSON of a server's type", input: func(c *wireConn) { c.frame([]byte(`{"v":1,"type":"welcome","body":{"uid":"8"}}`)) }, want: only("json", errFrame(pb.ErrorCode_UNKNOWN_TYPE))},
		{name: "JSON body of the wrong shape", input: func(c *wireConn) { c.frame([]byte(`{"v":1,"type":"send","body":{"conv_id":"abc"}}`)) }, want: only("json", errFrame(pb.ErrorCode_BAD_FRAME))},

		// Confirmations.
		{name: "huge ack_range", input: func(c *wireConn) { c.send(&pb.AckRange{UpToSeq: 1 << 60}) }, want: all3(errFrame(pb.ErrorCode_INVALID_ARGUMENT))},
		{name: "ack_range of the largest seq", input: func(c *wireConn) { c.send(&pb.AckRange{UpToSeq: 1<<64 - 1}) }, want: both(errFrame(pb.ErrorCode_INVALID_ARGUMENT))},
		{name: "ack_range 0: nothing to confirm", input: func(c *wireConn) { c.send(&pb.AckRange{}) }, want: both(noAnswer)},
		{name: "ack of unknown batch ids", input: func(c *wireConn) { c.send(&pb.Ack{BatchIds: []uint64{999, 1 << 62}}) }, want: all3(errFrame(pb.ErrorCode_INVALID_ARGUMENT))},
		{name: "ack of unknown seqs", input: func(c *wireConn) { c.send(&pb.Ack{Seqs: []uint64{123456, 1<<64 - 1}}) }, want: both(errFrame(pb.ErrorCode_INVALID_ARGUMENT))},
		{name: "ack of id 0: no batch or entry has it", input: func(c *wireConn) { c.send(&pb.Ack{BatchIds: []uint64{0}, Seqs: []uint64{0}}) }, want: both(noAnswer)},
		{name: "ack naming 10,000 unknown ids", input: func(c *wireConn) {
			ids := make([]uint64, 10_000)
			for i := range ids {
				ids[i] = uint64(1_000_000 + i)
			}
			c.send(&pb.Ack{Seqs: ids})
		}, want: both(errFrame(pb.ErrorCode_INVALID_ARGUMENT))},
		{name: "empty ack", input: func(c *wireConn) { c.send(&pb.Ack{}) }, want: both(noAnswer)},

		// Sends (wire.CheckSend; the conversation).
		{name: "send of an unknown kind", input: func(c *wireConn) { c.send(send(func(s *pb.Send) { s.Kind = 7 })) }, want: all3(rejected(pb.ErrorCode_INVALID_ARGUMENT))},
		{name: "send with conv_id 0", input: func(c *wireConn) { c.send(send(func(s *pb.Send) { s.ConvId = 0 })) }, want: both(rejected(pb.ErrorCode_INVALID_ARGUMENT))},
		{name: "send with a negative conv_id", input: func(c *wireConn) { c.send(send(func(s *pb.Send) { s.ConvId = -convA })) }, want: both(rejected(pb.ErrorCode_INVALID_ARGUMENT))},
		{name: "send without client_msg_id", input: func(c *wireConn) { c.send(send(func(s *pb.Send) { s.ClientMsgId = "" })) }, want: both(rejected(pb.ErrorCode_INVALID_ARGUMENT))},
		{name: "send with control characters in client_msg_id", input: func(c *wireConn) { c.send(send(func(s *pb.Send) { s.ClientMsgId = "a\r\nNats-Msg-Id: x" })) }, want: both(rejected(pb.ErrorCode_INVALID_ARGUMENT))},
		{name: "send with a client_msg_id over 128 bytes", input: func(c *wireConn) { c.send(send(func(s *pb.Send) { s.ClientMsgId = strings.Repeat("i", 129) })) }, want: both(rejected(pb.ErrorCode_INVALID_ARGUMENT))},
		{name: "send of a text over 16 KiB", input: func(c *wireConn) { c.send(send(func(s *pb.Send) { s.Text = strings.Repeat("x", wire.MaxTextLen+1) })) }, want: all3(rejected(pb.ErrorCode_INVALID_ARGUMENT))},
		{name: "send to a conversation that does not exist", input: func(c *wireConn) { c.send(send(func(s *pb.Send) { s.ConvId = 1 << 50 })) }, want: both(rejected(pb.ErrorCode_CONV_NOT_FOUND))},

		// Requests.
		{name: "pull with conv_id 0", input: func(c *wireConn) { c.send(&pb.Pull{RequestId: 21}) }, want: all3(reqErr(pb.ErrorCode_INVALID_ARGUMENT, 21))},
		{name: "pull with a negative conv_id", input: func(c *wireConn) { c.send(&pb.Pull{RequestId: 22, ConvId: -1}) }, want: both(reqErr(pb.ErrorCode_INVALID_ARGUMENT, 22))},
		{name: "pull with negative positions", input: func(c *wireConn) { c.send(&pb.Pull{RequestId: 23, ConvId: convG, AfterConvSeq: -5, BeforeConvSeq: -1}) }, want: both(reqErr(pb.ErrorCode_INVALID_ARGUMENT, 23))},
		{name: "pull of more than 50", input: func(c *wireConn) { c.send(&pb.Pull{RequestId: 24, ConvId: convG, Limit: 500}) }, want: both(reqErr(pb.ErrorCode_INVALID_ARGUMENT, 24))},
		{name: "read with conv_id 0", input: func(c *wireConn) { c.send(&pb.Read{RequestId: 25, UpToConvSeq: 1}) }, want: both(reqErr(pb.ErrorCode_INVALID_ARGUMENT, 25))},
		{name: "read with a negative position", input: func(c *wireConn) { c.send(&pb.Read{RequestId: 26, ConvId: convG, UpToConvSeq: -1}) }, want: both(reqErr(pb.ErrorCode_INVALID_ARGUMENT, 26))},
		{name: "read_count with conv_id 0", input: func(c *wireConn) { c.send(&pb.ReadCount{RequestId: 27, ConvSeq: 1}) }, want: both(reqErr(pb.ErrorCode_INVALID_ARGUMENT, 27))},
		{name: "read_count with a negative conv_seq", input: func(c *wireConn) { c.send(&pb.ReadCount{RequestId: 28, ConvId: convG, ConvSeq: -1}) }, want: both(reqErr(pb.ErrorCode_INVALID_ARGUMENT, 28))},
		{name: "summary_request with a negative before_msg_id", input: func(c *wireConn) { c.send(&pb.SummaryRequest{RequestId: 29, BeforeMsgId: -1}) }, want: all3(reqErr(pb.ErrorCode_INVALID_ARGUMENT, 29))},

		// Floods: the limited requests get RATE_LIMITED (not fatal, with
		// retry_after_ms and the request's id); pings are all answered.
		{name: "flood: ping", flood: func(c *wireConn) error { return floodPings(c, 2000) }},
		{name: "flood: summary_request", flood: func(c *wireConn) error {
			return floodRequests(c, func(id uint64) proto.Message { return &pb.SummaryRequest{RequestId: id} })
		}},
		{name: "flood: pull", flood: func(c *wireConn) error {
			return floodRequests(c, func(id uint64) proto.Message { return &pb.Pull{RequestId: id, ConvId: convG} })
		}},
		{name: "flood: read", flood: func(c *wireConn) error {
			return floodRequests(c, func(id uint64) proto.Message { return &pb.Read{RequestId: id, ConvId: convG, UpToConvSeq: 1} })
		}},
		{name: "flood: read_count", flood: func(c *wireConn) error {
			return floodRequests(c, func(id uint64) proto.Message { return &pb.ReadCount{RequestId: id, ConvId: convG, ConvSeq: 1} })
		}},
		{name: "flood: refresh", flood: func(c *wireConn) error {
			tok := testenv.Token(t, attacker, "atk-"+c.tr)
			return floodRequests(c, func(id uint64) proto.Message { return &pb.Refresh{RequestId: id, Token: tok} })
		}},
		{name: "flood: ack_range", flood: func(c *wireConn) error { return floodAckRange(c, lastSeq) }},
		{name: "flood: send", flood: func(c *wireConn) error { return floodSends(c, convN, 300) }},
		{name: "flood: ack of unknown ids", flood: func(c *wireConn) error {
			return floodAnswered(c, 500, func(i int) proto.Message { return &pb.Ack{BatchIds: []uint64{uint64(5_000_000 + i)}} }, pb.ErrorCode_INVALID_ARGUMENT)
		}},
		{name: "flood: second hello", flood: func(c *wireConn) error {
			hello := &pb.Hello{Token: testenv.Token(t, attacker, "atk-"+c.tr)}
			return floodAnswered(c, 300, func(int) proto.Message { return hello }, pb.ErrorCode_INVALID_ARGUMENT)
		}},
	}
	kinds := 0
	for _, row := range rows {
		on := transports
		if row.want != nil {
			on = slices.Sorted(maps.Keys(row.want))
		}
		kinds++
		for _, tr := range on {
			t.Run(row.name+"/"+tr, func(t *testing.T) {
				base := n.Gateway.Connections()
				from := by.sent()
				before, seen := w.state(t), v.seen()
				c := dialWire(t, n, tr)
				if !row.pre {
					c.hello(attacker, "atk-"+tr)
				}
				var err error
				if row.flood != nil {
					err = row.flood(c)
				} else {
					row.input(c)
					err = c.expect(row.want[tr])
				}
				if err != nil {
					t.Error(err)
				}
				c.nc.Close()
				waitConnections(t, n, base)
				probe := dialWire(t, n, tr) // the server takes a new login as before
				probe.hello(attacker, "probe-"+tr)
				if err := probe.pong(1); err != nil {
					t.Errorf("a new connection after the row: %v", err)
				}
				probe.nc.Close()
				waitConnections(t, n, base)
				time.Sleep(50 * time.Millisecond) // anything the row set off lands
				w.unchanged(t, before)
				v.nothingSince(t, seen)
				by.check(t, from)
			})
		}
	}
	if kinds < 25 {
		t.Fatalf("%d kinds of bad input, want at least 25", kinds)
	}
	by.stopAndCheck(t)
}

func all3(o outcome) map[string]outcome { return map[string]outcome{"tcp": o, "ws": o, "json": o} }
func both(o outcome) map[string]outcome { return map[string]outcome{"tcp": o, "ws": o} }
func only(tr string, o outcome) map[string]outcome {
	return map[string]outcome{tr: o}
}
func split(tcp, websocket outcome) map[string]outcome {
	return map[string]outcome{"tcp": tcp, "ws": websocket}
}

// wsFrameHeader is a frame header alone (masked with a fresh mask if
// h.Masked), the payload it announces to follow or not.
func wsFrameHeader(h ws.Header) []byte {
	if h.Masked {
		h.Mask = ws.NewMask()
	}
	var b bytes.Buffer
	_ = ws.WriteHeader(&b, h)
	return b.Bytes()
}

// halfClose ends the client's side of the stream: the server reads EOF in
// the middle of a frame.
func halfClose(c *wireConn) {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := c.nc.(closeWriter); ok {
		_ = cw.CloseWrite()
		return
	}
	c.t.Fatalf("%T cannot half-close", c.nc)
}

func waitConnections(t *testing.T, n *node.Node, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for n.Gateway.Connections() != want {
		if time.Now().After(deadline) {
			t.Fatalf("the gateway tracks %d connections, want %d: a closed connection was not forgotten", n.Gateway.Connections(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// floodLimit is how many requests a flood sends one after the other before
// it gives up on a RATE_LIMITED: far more than any per-user rate lets by.
const floodLimit = 300

// floodRequests sends requests one at a time (each answered before the
// next, so the connection's cap on requests in flight does not answer
// for the rate limit) until one is answered RATE_LIMITED: not fatal, with
// retry_after_ms and the request's id. Every answer before it must be the
// request's own.
func floodRequests(c *wireConn, req func(id uint64) proto.Message) error {
	for i := 1; i <= floodLimit; i++ {
		id := uint64(10_000 + i)
		c.send(req(id))
		m := c.reply()
		if e, ok := m.(*pb.Error); ok {
			if e.Code != pb.ErrorCode_RATE_LIMITED {
				return fmt.Errorf("request %d answered %v, want its result or RATE_LIMITED", i, e)
			}
			return limitedWell(e, id)
		}
		if m == nil {
			return fmt.Errorf("connection closed at request %d", i)
		}
		if got := requestIDOf(m); got != id {
			return fmt.Errorf("request %d (id %d) answered by %T %v", i, id, m, m)
		}
	}
	return fmt.Errorf("%d requests one after the other, none RATE_LIMITED", floodLimit)
}

func limitedWell(e *pb.Error, id uint64) error {
	if e.Fatal || e.RetryAfterMs == 0 || e.RequestId != id {
		return fmt.Errorf("RATE_LIMITED %v: want it not fatal, with retry_after_ms and request_id %d", e, id)
	}
	return nil
}

func requestIDOf(m proto.Message) uint64 {
	if r, ok := m.(interface{ GetRequestId() uint64 }); ok {
		return r.GetRequestId()
	}
	return 0
}

// floodAckRange sends ack_range up to upTo (the attacker's whole inbox: the
// first one confirms it, the rest change nothing), each followed by a ping,
// until one is answered RATE_LIMITED (not fatal, with retry_after_ms).
func floodAckRange(c *wireConn, upTo uint64) error {
	for i := 1; i <= floodLimit; i++ {
		c.send(&pb.AckRange{UpToSeq: upTo})
		c.send(&pb.Ping{Nonce: uint64(i)})
		switch m := c.reply().(type) {
		case *pb.Error:
			if m.Code != pb.ErrorCode_RATE_LIMITED {
				return fmt.Errorf("ack_range %d answered %v, want nothing or RATE_LIMITED", i, m)
			}
			return limitedWell(m, 0)
		case *pb.Pong:
		case nil:
			return fmt.Errorf("connection closed at ack_range %d", i)
		default:
			return fmt.Errorf("ack_range %d answered %T %v", i, m, m)
		}
	}
	return fmt.Errorf("%d ack_ranges one after the other, none RATE_LIMITED", floodLimit)
}

// pipeline writes frames on a goroutine while the caller reads: a flood
// does not wait for its answers, and neither side's socket buffer fills.
func pipeline(c *wireConn, frames [][]byte) <-chan error {
	done := make(chan error, 1)
	go func() {
		_ = c.nc.SetWriteDeadline(time.Now().Add(20 * time.Second))
		_, err := c.nc.Write(slices.Concat(frames...))
		done <- err
	}()
	return done
}

// floodPings sends count pings without waiting: every one is answered, in
// order.
func floodPings(c *wireConn, count int) error {
	frames := make([][]byte, count)
	for i := range frames {
		frames[i] = c.encode(&pb.Ping{Nonce: uint64(i + 1)})
	}
	wrote := pipeline(c, frames)
	for i := 1; i <= count; i++ {
		switch m := c.reply().(type) {
		case *pb.Pong:
			if m.Nonce != uint64(i) {
				return fmt.Errorf("pong %d, want %d", m.Nonce, i)
			}
		case nil:
			return fmt.Errorf("connection closed after %d of %d pongs", i-1, count)
		default:
			return fmt.Errorf("got %T %v among the pongs", m, m)
		}
	}
	return <-wrote
}

// floodAnswered sends count frames without waiting: each is answered with
// code or RATE_LIMITED, none fatally, and the session goes on.
func floodAnswered(c *wireConn, count int, frame func(i int) proto.Message, code pb.ErrorCode) error {
	frames := make([][]byte, count)
	for i := range frames {
		frames[i] = c.encode(frame(i))
	}
	wrote := pipeline(c, frames)
	for i := 1; i <= count; i++ {
		m := c.reply()
		e, ok := m.(*pb.Error)
		if !ok || e.Fatal || (e.Code != code && e.Code != pb.ErrorCode_RATE_LIMITED) {
			return fmt.Errorf("answer %d of %d: %T %v, want %s or RATE_LIMITED, not fatal", i, count, m, m, code)
		}
	}
	if err := <-wrote; err != nil {
		return err
	}
	return c.pong(8001)
}

// floodSends sends count sends to conv (not the sender's) without waiting:
// each is answered once, REJECTED NOT_MEMBER or FAILED RATE_LIMITED, and
// some are RATE_LIMITED.
func floodSends(c *wireConn, conv int64, count int) error {
	frames := make([][]byte, count)
	for i := range frames {
		frames[i] = c.encode(&pb.Send{ClientMsgId: fmt.Sprintf("flood-%s-%d", c.tr, i), ConvId: conv, Text: "flood"})
	}
	wrote := pipeline(c, frames)
	answered := map[string]bool{}
	limited := 0
	for len(answered) < count {
		m := c.reply()
		r, ok := m.(*pb.SendResult)
		if !ok {
			return fmt.Errorf("after %d send results: %T %v", len(answered), m, m)
		}
		switch {
		case answered[r.ClientMsgId]:
			return fmt.Errorf("%s answered twice", r.ClientMsgId)
		case r.Status == pb.SendStatus_FAILED && r.Code == pb.ErrorCode_RATE_LIMITED:
			limited++
		case r.Status == pb.SendStatus_REJECTED && r.Code == pb.ErrorCode_NOT_MEMBER:
		default:
			return fmt.Errorf("send %s answered %v", r.ClientMsgId, r)
		}
		answered[r.ClientMsgId] = true
	}
	if err := <-wrote; err != nil {
		return err
	}
	if limited == 0 {
		return fmt.Errorf("%d sends at once, none RATE_LIMITED", count)
	}
	return nil
}

// bystander is a pair of users on the same gateway exchanging live
// messages the whole time, one after the other: bad input on other
// connections must not lose, reorder or stall them.
type bystander struct {
	conv   int64
	mu     sync.Mutex
	sentAt []time.Time // message i (from 1) at [i-1]
	got    []int       // message numbers in the order received
	recvAt map[int]time.Time
	err    error
	more   chan struct{}
	stop   chan struct{}
	done   chan struct{}
}

// liveness is the generous bound on a bystander message's latency: the
// machine is shared, figures are logged, not asserted.
const liveness = 5 * time.Second

func startBystander(t *testing.T, n *node.Node, from, to int64) *bystander {
	t.Helper()
	b := &bystander{conv: createConv(t, n, false, from, to), recvAt: map[int]time.Time{},
		more: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	recv, err := client.Dial(ctxT(t, 10*time.Second), client.Options{
		URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, to, "by"),
		Handler: func(m client.Message) error {
			i, err := strconv.Atoi(strings.TrimPrefix(m.Text, "by "))
			b.mu.Lock()
			if err != nil && b.err == nil {
				b.err = fmt.Errorf("bystander got %q", m.Text)
			}
			b.got = append(b.got, i)
			b.recvAt[i] = time.Now()
			b.mu.Unlock()
			select {
			case b.more <- struct{}{}:
			default:
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { recv.Close() })
	snd := dial(t, n, "ws", from, "by")
	go func() {
		defer close(b.done)
		ctx := ctxT(t, 10*time.Minute)
		for i := 1; ; i++ {
			select {
			case <-b.stop:
				return
			default:
			}
			b.mu.Lock()
			b.sentAt = append(b.sentAt, time.Now())
			b.mu.Unlock()
			if _, err := snd.Send(ctx, b.conv, "by-"+strconv.Itoa(i), "by "+strconv.Itoa(i)); err != nil {
				b.mu.Lock()
				b.err = fmt.Errorf("bystander send %d: %w", i, err)
				b.mu.Unlock()
				return
			}
			time.Sleep(25 * time.Millisecond)
		}
	}()
	return b
}

// sent is how many messages the bystander began to send so far.
func (b *bystander) sent() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sentAt)
}

// check waits until the messages sent so far, and at least one begun after
// from (during the row), arrived; each must have come once, in order,
// within the liveness bound. It logs their latencies.
func (b *bystander) check(t *testing.T, from int) {
	t.Helper()
	want := max(b.sent(), from+1)
	deadline := time.After(2 * liveness)
	for {
		b.mu.Lock()
		got, err := len(b.got), b.err
		b.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if got >= want {
			break
		}
		select {
		case <-b.more:
		case <-deadline:
			t.Fatalf("bystander: %d of %d messages arrived within %s", got, want, 2*liveness)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, i := range b.got {
		if i != k+1 {
			t.Fatalf("bystander: message %d arrived as number %d (lost, repeated or out of order): %v", i, k+1, b.got)
		}
	}
	var lat []time.Duration
	for i := from + 1; i <= want; i++ {
		d := b.recvAt[i].Sub(b.sentAt[i-1])
		if d > liveness {
			t.Errorf("bystander: message %d took %s (liveness bound %s)", i, d, liveness)
		}
		lat = append(lat, d)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("bystander: %d live messages during the row, latency p50 %s, max %s", len(lat),
		lat[len(lat)/2].Round(100*time.Microsecond), lat[len(lat)-1].Round(100*time.Microsecond))
}

// stopAndCheck stops the bystander and checks that everything it sent
// arrived, once and in order.
func (b *bystander) stopAndCheck(t *testing.T) {
	t.Helper()
	close(b.stop)
	<-b.done
	b.check(t, b.sent()-1)
	t.Logf("bystander: %d live messages over the whole table", b.sent())
}
