package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// BenchmarkSendPath measures the whole write path: client → gateway → SEND
// → fanout → Postgres + INBOX → STORED, with 8 senders on their own
// conversations keeping 256 sends each in flight. It reports inbox
// entries/s and messages/s; BenchmarkRawInboxPublish is the baseline to
// divide by (run both in one `go test -bench` to compare on one machine).
func BenchmarkSendPath(b *testing.B) {
	for _, size := range []int{2, 10, 100} {
		name := "direct"
		if size > 2 {
			name = "group" + strconv.Itoa(size)
		}
		b.Run(name, func(b *testing.B) { benchSendPath(b, size) })
	}
}

func benchSendPath(b *testing.B, size int) {
	n := testnode.AllInOne(b)
	const senders, window = 8, 256
	ctx := context.Background()
	convs := make([]int64, senders)
	clients := make([]*client.Client, senders)
	for s := range senders {
		base := int64(s*1000 + 1)
		members := make([]int64, size)
		for i := range members {
			members[i] = base + int64(i)
		}
		convs[s] = createConv(b, n, size > 2, members...)
		c, err := client.Dial(ctx, client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(b, base, "bench")})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		clients[s] = c
	}
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	per := (b.N + senders - 1) / senders
	for s := range senders {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			inflight := make([]*client.PendingSend, 0, window)
			for i := 0; i < per; i++ {
				if len(inflight) == window {
					if _, err := inflight[0].Wait(ctx); err != nil {
						b.Error(err)
						return
					}
					inflight = inflight[1:]
				}
				inflight = append(inflight, clients[s].SendAsync(convs[s], fmt.Sprintf("b%d-%d", s, i), "benchmark message body of a typical length"))
			}
			for _, p := range inflight {
				if _, err := p.Wait(ctx); err != nil {
					b.Error(err)
				}
			}
		}(s)
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	msgs := float64(per * senders)
	b.ReportMetric(msgs/el, "msgs/s")
	b.ReportMetric(msgs*float64(size)/el, "entries/s")
}

// BenchmarkRawInboxPublish is the baseline: async JetStream publishes of
// inbox entries (same streams, same headers and dedupe ids, 16 KiB of
// publishes in flight) with no gateway, fanout or Postgres.
func BenchmarkRawInboxPublish(b *testing.B) {
	n := testnode.AllInOne(b)
	layout := testnode.Config(b, "").Layout
	js, err := jetstream.New(n.NC, jetstream.WithPublishAsyncMaxPending(16384))
	if err != nil {
		b.Fatal(err)
	}
	e := streams.Entry{MsgID: 1 << 40, ConvID: 1, ConvSeq: 1, SenderUID: 1, Kind: 1, CreatedAtMs: time.Now().UnixMilli()}
	payload, err := e.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		uid := int64(i%1000 + 1)
		m := e.Msg(ids.Partition(uid, layout.InboxPartitions), uid, payload, streams.MessageDedupeID(int64(i), uid))
		if _, err := js.PublishMsgAsync(m); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "entries/s")
}

// BenchmarkCatchUpScale measures how long a device with a 200-message
// backlog takes to drain (connect to the 200th message handed over) when
// the INBOX streams hold 100k and 2M entries in total, the device's
// messages spread evenly through them. "archive" is inboxd's catch-up
// (older ranges from the Postgres (uid, seq) index, the consumer only for
// the recent tail); "consumer" forces a pure filtered-consumer catch-up
// (TailScan above the stream size), which scans everyone's entries.
// Run: go test -run '^$' -bench CatchUpScale -benchtime 5x -timeout 30m ./internal/e2e/
func BenchmarkCatchUpScale(b *testing.B) {
	for _, total := range []int{100_000, 2_000_000} {
		for _, mode := range []string{"archive", "consumer"} {
			b.Run(fmt.Sprintf("%dk/%s", total/1000, mode), func(b *testing.B) { benchCatchUp(b, total, mode) })
		}
	}
}

func benchCatchUp(b *testing.B, total int, mode string) {
	cfg := testnode.Config(b, testenv.Database(b))
	cfg.Layout = streams.DefaultLayout // 16 partitions, as installed by default
	if mode == "consumer" {
		cfg.TailScan = 1 << 30
	}
	n := testnode.StartNode(b, cfg, config.RoleEmbeddedNATS|config.RoleGateway|config.RoleFanout|config.RoleSyncer)
	const backlog, group = 200, 100
	direct := createConv(b, n, false, 1, 2)
	var groups []int64
	for g := 0; g < 20; g++ {
		members := make([]int64, group)
		members[0] = 9999 // the background sender is in every group
		for i := 1; i < group; i++ {
			members[i] = int64(10000 + g*group + i)
		}
		groups = append(groups, createConv(b, n, true, members...))
	}
	// Interleave: after every slice of background traffic, one message to uid 2.
	bgMsgs := (total - 2*backlog) / group
	per := bgMsgs / backlog
	sender, err := client.Dial(context.Background(), client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(b, 9999, "bg")})
	if err != nil {
		b.Fatal(err)
	}
	defer sender.Close()
	direct1, err := client.Dial(context.Background(), client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(b, 1, "d")})
	if err != nil {
		b.Fatal(err)
	}
	defer direct1.Close()
	var window []*client.PendingSend
	wait := func(k int) {
		for len(window) > k {
			if _, err := window[0].Wait(context.Background()); err != nil {
				b.Fatal(err)
			}
			window = window[1:]
		}
	}
	for i := 0; i < backlog; i++ {
		for j := 0; j < per; j++ {
			wait(511)
			window = append(window, sender.SendAsync(groups[j%len(groups)], fmt.Sprintf("bg-%d-%d", i, j), "background"))
		}
		wait(0)
		if _, err := direct1.Send(context.Background(), direct, fmt.Sprintf("d-%d", i), "for uid 2"); err != nil {
			b.Fatal(err)
		}
	}
	waitArchived(b, n, per*backlog*group+2*backlog)
	b.ResetTimer()
	var sum time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		d := connectDevice(b, n, 2, fmt.Sprintf("fresh-%d", i), deviceOpts{})
		d.waitFor(backlog, 5*time.Minute)
		sum += time.Since(start)
		d.close()
	}
	b.ReportMetric(float64(sum.Microseconds())/1000/float64(b.N), "drain-ms")
	b.ReportMetric(metric(b, n, `inboxd_gateway_backfill_pages_total{source="archive"}`)/float64(b.N), "archive-pages/op")
}
