package fanout

import (
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/streams"
)

// BenchmarkFanoutLiveLane measures the cost of the live lane on the publish
// path: groups of 10 whose members are all subscribed (online), with the
// per-entry core NATS announcement after each PubAck ("live") and without
// ("off"). Compare entries/s within one run.
func BenchmarkFanoutLiveLane(b *testing.B) {
	for _, live := range []bool{true, false} {
		name := "live"
		if !live {
			name = "off"
		}
		b.Run(name, func(b *testing.B) {
			r := newRig(b, Options{NoLive: !live}, nil)
			conv := r.group(members(1, 10)...)
			// Every member online: a subscriber per member's live subject,
			// on its own connection, as gateways would hold.
			for _, uid := range members(1, 10) {
				nc, err := nats.Connect(r.nats.URL())
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
				sub, _ := nc.Subscribe(streams.UserWildcard(ids.Partition(uid, layout.InboxPartitions), uid), func(*nats.Msg) {})
				_ = sub.SetPendingLimits(-1, -1)
			}
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				cmid := "b" + strconv.Itoa(i)
				r.sendAsync(1, conv, cmid, "benchmark message body of a typical length", "1:"+cmid)
			}
			for i := 0; i < b.N; i++ {
				if _, ok := r.result(60 * time.Second); !ok {
					b.Fatalf("only %d of %d results", i, b.N)
				}
			}
			b.ReportMetric(float64(b.N*10)/time.Since(start).Seconds(), "entries/s")
		})
	}
}
