package gateway

import (
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/gateway/ledger"
)

// BenchmarkAckReceipts: the per-ack work from the ledger's confirmation to
// the DELIVERED receipts, for a 50-entry page of the device's own messages
// and events (no receipt goes out: nothing is published).
func BenchmarkAckReceipts(b *testing.B) {
	const uid, pageLen = 7, 50
	w := testEventWriter(retryPolicy{})
	l := ledger.New(0)
	entries := make([]ledger.Entry, pageLen)
	var seq uint64
	b.ReportAllocs()
	for b.Loop() {
		for i := range entries {
			seq++
			entries[i] = ledger.Entry{Seq: seq, Message: i%2 == 0, Info: ledger.Info{Conv: 1, ConvSeq: int64(seq), Sender: uid}}
		}
		id, _, _ := l.Page(l.Covered(), seq, entries, time.Time{})
		r := l.Ack(nil, []uint64{id}, nil)
		w.delivered(uid, "d", r.Receipts)
	}
}
