package gateway

import (
	"bufio"
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// discardConn is a net.Conn whose writes succeed at once.
type discardConn struct{ net.Conn }

func (discardConn) Write(b []byte) (int, error)      { return len(b), nil }
func (discardConn) SetWriteDeadline(time.Time) error { return nil }
func (discardConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (discardConn) Close() error                     { return nil }

func benchConn(_ testing.TB, ws bool) *Conn {
	g := &Gateway{opts: Options{WriteTimeout: time.Second}, log: zap.NewNop(), metrics: newMetrics(prometheus.NewRegistry())}
	var tr transport = &tcpTransport{r: bufio.NewReader(nil), max: wire.DefaultMaxFrame}
	if ws {
		tr = &wsTransport{r: bufio.NewReader(nil), max: wire.DefaultMaxFrame}
	}
	return &Conn{g: g, nc: discardConn{}, tr: tr, done: make(chan struct{})}
}

func fillPage(pg *page, n int) {
	for i := 0; i < n; i++ {
		pg.msgs = append(pg.msgs, wire.Message{Seq: uint64(1000 + i), MsgID: 252788381291905024 + int64(i), ConvID: 42,
			ConvSeq: int64(i + 1), SenderUID: 7, Kind: 1, Text: "a message of a typical length, with ünïcode", CreatedAtMs: 1764420000000})
	}
	pg.hdr = wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 1, HasMore: true}
}

// BenchmarkWriterBackfillPage: one 500-message backfill page through the
// connection writer (page from the pool, encoded into the write buffer,
// written, page back to the pool). Target: 0 allocs per message.
func BenchmarkWriterBackfillPage(b *testing.B) {
	for _, ws := range []bool{false, true} {
		name := "tcp"
		if ws {
			name = "websocket"
		}
		b.Run(name, func(b *testing.B) {
			w := &writer{c: benchConn(b, ws)}
			const n = 500
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				pg := getPage()
				fillPage(pg, n)
				w.addPage(pg)
				if err := w.flush(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/msg")
		})
	}
}

// BenchmarkWriterLive: bursts of 32 live entries (already encoded by the
// fanout) coalesced into one Batch frame and written.
func BenchmarkWriterLive(b *testing.B) {
	w := &writer{c: benchConn(b, false)}
	raw, _ := proto.Marshal(&pb.Message{Seq: 5000, MsgId: 252788381291905024, ConvId: 1, ConvSeq: 3, SenderUid: 2, Kind: 1,
		Text: "a message of a typical length", CreatedAtMs: 1764420000000})
	const burst = 32
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		for j := 0; j < burst; j++ {
			w.add(outItem{live: raw, liveSeq: uint64(j)})
		}
		if err := w.flush(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*burst), "ns/msg")
}

// The writer's hot path allocates nothing once its buffers have grown: a
// backfill page (binary, on both transports) and a burst of live entries.
func TestWriterHotPathAllocatesNothing(t *testing.T) {
	raw, _ := proto.Marshal(&pb.Message{Seq: 5000, MsgId: 252788381291905024, ConvId: 1, ConvSeq: 3, SenderUid: 2, Kind: 1,
		Text: "a message of a typical length", CreatedAtMs: 1764420000000})
	for _, ws := range []bool{false, true} {
		w := &writer{c: benchConn(t, ws)}
		page := func() {
			pg := getPage()
			fillPage(pg, 500)
			w.addPage(pg)
			if err := w.flush(); err != nil {
				t.Fatal(err)
			}
		}
		live := func() {
			for j := 0; j < 32; j++ {
				w.add(outItem{live: raw, liveSeq: uint64(j)})
			}
			if err := w.flush(); err != nil {
				t.Fatal(err)
			}
		}
		for name, fn := range map[string]func(){"backfill page": page, "live burst": live} {
			if n := testing.AllocsPerRun(100, fn); n != 0 {
				t.Errorf("websocket %v: %s: %.0f allocations per run, want 0", ws, name, n)
			}
		}
	}
}

// captureConn is a net.Conn that keeps what is written.
type captureConn struct {
	discardConn
	buf []byte
}

func (c *captureConn) Write(b []byte) (int, error) { c.buf = append(c.buf, b...); return len(b), nil }

// The JSON form of a batch carries what the binary form carries: events
// (read_sync, receipts) and the batch flags.
func TestWriterJSONBatchCarriesEvents(t *testing.T) {
	cc := &captureConn{}
	c := benchConn(t, false)
	c.nc, c.json = cc, true
	w := &writer{c: c}
	pg := getPage()
	pg.msgs = append(pg.msgs,
		wire.Message{Seq: 7, MsgID: 99, ConvID: 3, ConvSeq: 1, SenderUID: 2, Kind: 1, Text: "hi", CreatedAtMs: 1},
		wire.Message{Seq: 8, ConvID: 3, EventType: uint32(pb.EventType_READ), EventUpTo: 1, EventPeer: 2})
	pg.hdr = wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 5, HasMore: true, Newest: true}
	w.addPage(pg)
	if err := w.flush(); err != nil {
		t.Fatal(err)
	}
	f, err := wire.ReadTCPFrame(bufio.NewReader(bytes.NewReader(cc.buf)), nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	_, m, err := wire.UnmarshalJSONFrame(f)
	if err != nil {
		t.Fatalf("%s: %v", f, err)
	}
	want := &pb.Batch{Lane: pb.Lane_BACKFILL, BatchId: 5, HasMore: true, Newest: true, Messages: []*pb.Message{
		{Seq: 7, MsgId: 99, ConvId: 3, ConvSeq: 1, SenderUid: 2, Kind: 1, Text: "hi", CreatedAtMs: 1},
		{Seq: 8, ConvId: 3, Event: &pb.Event{Type: pb.EventType_READ, ConvId: 3, UpToConvSeq: 1, PeerUid: 2}},
	}}
	if !proto.Equal(m, want) {
		t.Fatalf("JSON batch %s\nwant %v", f, want)
	}
}

// A fatal error is the last frame of its connection: a backfill page
// waiting in the same round is not written after it.
func TestWriterWritesNothingAfterAFatalError(t *testing.T) {
	cc := &captureConn{}
	c := benchConn(t, false)
	c.nc, c.backfill = cc, make(chan *page, 1)
	pg := getPage()
	fillPage(pg, 3)
	c.backfill <- pg
	c.out = []outItem{{msg: &pb.Error{Code: pb.ErrorCode_BAD_FRAME, Message: "broken", Fatal: true}, close: true}}
	c.writing.Store(true)
	c.writeLoop()
	r := bufio.NewReader(bytes.NewReader(cc.buf))
	f, err := wire.ReadTCPFrame(r, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, m, err := wire.Decode(f); err != nil || m.(*pb.Error).GetCode() != pb.ErrorCode_BAD_FRAME {
		t.Fatalf("first frame %v %v, want the fatal error", m, err)
	}
	if f, err := wire.ReadTCPFrame(r, nil, 1<<20); err == nil {
		_, m, _ := wire.Decode(f)
		t.Fatalf("after the fatal error the writer wrote %T %v", m, m)
	}
}
