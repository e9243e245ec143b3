package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// scripted is an inboxd server played by a test: it speaks the real wire
// protocol (length-prefixed TCP frames, wire.Decode, wire.AppendFrame,
// wire.AppendBatchFrame) over a real socket, so a test can pin an exact
// interleaving (a gap, a repeat, a reorder, a connection that drops at a
// given point) that a real node produces only by chance.
type scripted struct {
	t  *testing.T
	ln net.Listener
	// answer returns the reply to the hello of the n-th connection (from 1):
	// a *pb.Welcome, or a *pb.Error after which the connection is closed.
	answer func(n int, h *pb.Hello) proto.Message
	conns  chan *scriptConn

	mu      sync.Mutex
	helloAt []time.Time // when each hello arrived
}

// scriptConn is one accepted connection past its hello.
type scriptConn struct {
	t     *testing.T
	n     int
	nc    net.Conn
	wmu   sync.Mutex
	mu    sync.Mutex
	got   []proto.Message // every frame the client sent after hello, pings excepted
	more  chan struct{}
	ended chan struct{}
}

// newScripted listens on a free loopback port. answer may be nil: every
// hello is then answered by welcome().
func newScripted(t *testing.T, answer func(n int, h *pb.Hello) proto.Message) *scripted {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if answer == nil {
		answer = func(int, *pb.Hello) proto.Message { return welcome(0) }
	}
	s := &scripted{t: t, ln: ln, answer: answer, conns: make(chan *scriptConn, 16)}
	t.Cleanup(func() { ln.Close() })
	go s.accept()
	return s
}

// welcome is a welcome with pending inbox entries and a heartbeat long
// enough that the client's pings stay out of the way.
func welcome(pending uint64) *pb.Welcome {
	return &pb.Welcome{Uid: 7, Device: "d", HeartbeatMs: 60_000, Pending: pending, PageSize: 100, MaxInflightSends: 256}
}

func (s *scripted) url() string { return "tcp://" + s.ln.Addr().String() }

func (s *scripted) accept() {
	for n := 1; ; n++ {
		nc, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.serve(n, nc)
	}
}

func (s *scripted) serve(n int, nc net.Conn) {
	r := bufio.NewReader(nc)
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	frame, err := wire.ReadTCPFrame(r, nil, wire.DefaultMaxFrame)
	if err != nil {
		nc.Close()
		return
	}
	_ = nc.SetReadDeadline(time.Time{})
	_, m, err := wire.Decode(frame)
	h, ok := m.(*pb.Hello)
	if err != nil || !ok {
		s.t.Errorf("connection %d: first frame %T (%v), want hello", n, m, err)
		nc.Close()
		return
	}
	s.mu.Lock()
	s.helloAt = append(s.helloAt, time.Now())
	s.mu.Unlock()
	c := &scriptConn{t: s.t, n: n, nc: nc, more: make(chan struct{}, 1), ended: make(chan struct{})}
	reply := s.answer(n, h)
	c.send(reply)
	if _, isErr := reply.(*pb.Error); isErr {
		nc.Close()
		return
	}
	go c.read(r)
	s.conns <- c
}

// helloTimes returns when each connection's hello arrived.
func (s *scripted) helloTimes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.helloAt)
}

// next waits for the next connection that got a welcome.
func (s *scripted) next() *scriptConn {
	s.t.Helper()
	select {
	case c := <-s.conns:
		return c
	case <-time.After(10 * time.Second):
		s.t.Fatal("scripted server: no connection within 10s")
		return nil
	}
}

func (c *scriptConn) read(r *bufio.Reader) {
	defer close(c.ended)
	var buf []byte
	for {
		frame, err := wire.ReadTCPFrame(r, buf, wire.DefaultMaxFrame)
		if err != nil {
			return
		}
		_, m, err := wire.Decode(frame)
		if err != nil {
			c.t.Errorf("connection %d: client sent a bad frame: %v", c.n, err)
			return
		}
		if _, ping := m.(*pb.Ping); ping {
			continue
		}
		c.mu.Lock()
		c.got = append(c.got, m)
		c.mu.Unlock()
		select {
		case c.more <- struct{}{}:
		default:
		}
	}
}

func (c *scriptConn) write(frame []byte) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	out, at := wire.AppendLengthPrefix(nil)
	out = append(out, frame...)
	wire.PutLengthPrefix(out, at)
	_ = c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(out); err != nil && !errors.Is(err, net.ErrClosed) {
		c.t.Logf("scripted server: write on connection %d: %v", c.n, err)
	}
}

// send writes one frame.
func (c *scriptConn) send(m proto.Message) {
	frame, err := wire.AppendFrame(nil, m)
	if err != nil {
		c.t.Fatal(err)
	}
	c.write(frame)
}

// batch writes a batch frame, encoded the way the gateway encodes them.
func (c *scriptConn) batch(h wire.BatchHeader, msgs ...wire.Message) {
	c.write(wire.AppendBatchFrame(nil, &h, msgs, nil))
}

// close drops the connection (the client sees it lost).
func (c *scriptConn) close() { c.nc.Close() }

// frames returns what the client sent so far.
func (c *scriptConn) frames() []proto.Message {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

// waitFrames waits until cond holds for the frames the client sent, and
// fails with what it saw when it does not within 10s.
func (c *scriptConn) waitFrames(what string, cond func([]proto.Message) bool) []proto.Message {
	c.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		got := c.frames()
		if cond(got) {
			return got
		}
		select {
		case <-c.more:
		case <-time.After(20 * time.Millisecond): // more is shared with servePulls
		case <-deadline:
			c.t.Fatalf("connection %d: waited 10s for %s; the client sent %v", c.n, what, describe(got))
		}
	}
}

// waitAcked waits until every batch id was confirmed by an ack.
func (c *scriptConn) waitAcked(ids ...uint64) {
	c.t.Helper()
	c.waitFrames(fmt.Sprintf("acks of batches %v", ids), func(got []proto.Message) bool {
		acked := ackedBatches(got)
		for _, id := range ids {
			if !acked[id] {
				return false
			}
		}
		return true
	})
}

func ackedBatches(frames []proto.Message) map[uint64]bool {
	acked := map[uint64]bool{}
	for _, f := range frames {
		if a, ok := f.(*pb.Ack); ok {
			for _, id := range a.GetBatchIds() {
				acked[id] = true
			}
		}
	}
	return acked
}

func ofType[T proto.Message](frames []proto.Message) []T {
	var out []T
	for _, f := range frames {
		if m, ok := f.(T); ok {
			out = append(out, m)
		}
	}
	return out
}

func describe(frames []proto.Message) []string {
	out := make([]string, 0, len(frames))
	for _, f := range frames {
		t, _ := wire.TypeOf(f)
		out = append(out, fmt.Sprintf("%s%v", t, f))
	}
	return out
}

// msg is inbox entry seq holding message convSeq of conv; msg_ids are
// unique per (conv, convSeq) and readable in failures.
func msg(seq uint64, conv, convSeq int64) wire.Message {
	return wire.Message{Seq: seq, MsgID: conv*1000 + convSeq, ConvID: conv, ConvSeq: convSeq, SenderUID: 9, Kind: 1,
		Text: fmt.Sprintf("c%d#%d", conv, convSeq), CreatedAtMs: 1}
}

// app is an application on top of the client: it stores what it is handed.
type app struct {
	mu   sync.Mutex
	got  []Message
	more chan struct{}
}

func newApp() *app { return &app{more: make(chan struct{}, 1)} }

func (a *app) handle(m Message) error {
	a.mu.Lock()
	a.got = append(a.got, m)
	a.mu.Unlock()
	select {
	case a.more <- struct{}{}:
	default:
	}
	return nil
}

func (a *app) messages() []Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got)
}

// waitN waits until the application holds n messages.
func (a *app) waitN(t *testing.T, n int) []Message {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		got := a.messages()
		if len(got) >= n {
			return got
		}
		select {
		case <-a.more:
		case <-deadline:
			t.Fatalf("waited 10s for %d messages; the handler got %d: %v", n, len(got), brief(got))
		}
	}
}

// quiet returns what the application holds once nothing more arrived for d.
func (a *app) quiet(d time.Duration) []Message {
	for {
		select {
		case <-a.more:
		case <-time.After(d):
			return a.messages()
		}
	}
}

// brief renders messages as conv#conv_seq(lane[,late]).
func brief(ms []Message) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, fmt.Sprintf("c%d#%d(%s)", m.ConvID, m.ConvSeq, m.Lane))
	}
	return out
}

// dialScripted connects a client to s and returns it with the server side
// of its first connection.
func dialScripted(t *testing.T, s *scripted, opts Options) (*Client, *scriptConn) {
	t.Helper()
	opts.URL = s.url()
	if opts.Token == "" {
		opts.Token = "t"
	}
	if opts.MinBackoff == 0 {
		opts.MinBackoff, opts.MaxBackoff = 10*time.Millisecond, 50*time.Millisecond
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, s.next()
}

// answer replies to every frame the client sent (from now on, and those
// sent before) for which reply returns a frame, until the connection ends.
func (c *scriptConn) answer(reply func(proto.Message) proto.Message) {
	go func() {
		answered := 0
		for {
			select {
			case <-c.more:
			case <-c.ended:
				return
			case <-time.After(20 * time.Millisecond):
			}
			got := c.frames()
			for _, m := range got[answered:] {
				if r := reply(m); r != nil {
					c.send(r)
				}
			}
			answered = len(got)
		}
	}()
}

// servePulls answers every pull of the client from timeline (per
// conversation, ascending conv_seq), the way the gateway does.
func (c *scriptConn) servePulls(timeline map[int64][]wire.Message) {
	c.answer(func(m proto.Message) proto.Message {
		p, ok := m.(*pb.Pull)
		if !ok {
			return nil
		}
		res := &pb.PullResult{RequestId: p.GetRequestId(), ConvId: p.GetConvId()}
		for _, m := range timeline[p.GetConvId()] {
			if m.ConvSeq <= p.GetAfterConvSeq() {
				continue
			}
			if len(res.Messages) == int(p.GetLimit()) {
				res.HasMore = true
				break
			}
			res.Messages = append(res.Messages, &pb.Message{MsgId: m.MsgID, ConvId: m.ConvID, ConvSeq: m.ConvSeq,
				SenderUid: m.SenderUID, Kind: m.Kind, Text: m.Text, CreatedAtMs: m.CreatedAtMs})
		}
		return res
	})
}
