package gateway

import (
	"bufio"
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

func benchConn(b *testing.B, ws bool) *Conn {
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
