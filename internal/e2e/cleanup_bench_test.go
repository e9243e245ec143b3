package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/archive"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// BenchmarkEarlyCleanup measures what the early cleanup costs the write
// path and catch-up. One node; each iteration is a pair of phases, the
// cleanup off and on (the real archive.Cleaner, started and stopped by the
// benchmark, on a NATS connection and a Postgres pool of its own), each
// phase the same load: 8 senders write 4,000 messages to groups of 8 whose
// members are online and confirm everything (with --new-device-max 10, so
// the cleanup finds confirmed entries to purge), then one device logs in
// to a 300-message backlog while a background sender keeps 200 messages/s
// going. Pairs measured back to back, in alternating order, cancel the
// drift of a shared machine. It reports the medians of each side and of
// the per-pair ratios (sends on/off; drain-ms: login to the last message),
// and what the cleanup did. "default" paces purges at --cleanup-rate's
// default (20/s) with a round every 100 ms (100 times the default's rounds:
// their direct gets and queries at their most); "unpaced" allows 1000
// purges/s.
//
// Run: go test -run '^$' -bench EarlyCleanup -benchtime 8x -timeout 30m ./internal/e2e/
func BenchmarkEarlyCleanup(b *testing.B) {
	for _, mode := range []struct {
		name string
		rate float64
	}{{"default", config.Defaults().CleanupRate}, {"unpaced", 1000}} {
		b.Run(mode.name, func(b *testing.B) { benchCleanup(b, mode.rate) })
	}
}

func benchCleanup(b *testing.B, rate float64) {
	cfg := testnode.Config(b, testenv.Database(b))
	cfg.Layout = streams.DefaultLayout
	cfg.NewDeviceWindow, cfg.NewDeviceMax = time.Hour, 10
	cfg.CleanupEvery = 0 // the benchmark runs its own
	n := testnode.StartNode(b, cfg, config.RoleAllInOne)
	ctx := context.Background()
	const senders, group, window, perPhase, backlog = 8, 8, 256, 4000, 300

	// Online members that confirm everything: their entries are what the
	// cleanup removes.
	convs := make([]int64, senders)
	clients := make([]*client.Client, senders)
	for s := range senders {
		base := int64(1000 + s*100)
		members := make([]int64, group)
		for i := range members {
			members[i] = base + int64(i)
		}
		convs[s] = createConv(b, n, true, members...)
		for _, m := range members[1:] {
			connectDevice(b, n, m, "online", deviceOpts{transport: "tcp"})
		}
		c, err := client.Dial(ctx, client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(b, base, "bench")})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		clients[s] = c
	}
	// Devices that come back to a backlog (their rows exist, at cursor 0),
	// two per pair.
	catchers := 2 * b.N
	for i := range catchers {
		uid := int64(5001 + i)
		conv := createConv(b, n, false, 5000, uid)
		connectDevice(b, n, uid, "catch", deviceOpts{transport: "tcp"}).close()
		sendN(b, n, 5000, conv, backlog, fmt.Sprintf("backlog%d", i))
	}

	// Every device's row is written before the cleaner starts (its margin
	// here is below the gateways' cursor flush; see below).
	checkFor(b, 30*time.Second, func() error {
		if got, want := count(b, n, `SELECT count(*)::int FROM device_cursor WHERE device IN ('online', 'catch')`), senders*(group-1)+catchers; got != want {
			return fmt.Errorf("%d device rows, want %d", got, want)
		}
		return nil
	})
	sendAll := func(per int, tag string) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
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
					inflight = append(inflight, clients[s].SendAsync(convs[s], fmt.Sprintf("%s-%d-%d", tag, s, i), "benchmark message body of a typical length"))
				}
				for _, p := range inflight {
					if _, err := p.Wait(ctx); err != nil {
						b.Error(err)
					}
				}
			}(s)
		}
		wg.Wait()
		return time.Since(start)
	}
	catchUp := func(i int) time.Duration {
		stop := make(chan struct{})
		var bg sync.WaitGroup
		bg.Add(1)
		go func() {
			defer bg.Done()
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				clients[k%senders].SendAsync(convs[k%senders], fmt.Sprintf("bg%d-%d", i, k), "background")
			}
		}()
		defer func() { close(stop); bg.Wait() }()
		start := time.Now()
		d := connectDevice(b, n, int64(5001+i), "catch", deviceOpts{transport: "tcp"})
		d.waitFor(backlog, 2*time.Minute)
		took := time.Since(start)
		d.close()
		return took
	}

	// Its own pool, as a syncer of a split deployment has: in this
	// all-in-one node the fanout's batches would hold the shared one's few
	// connections, and the cleanup's rounds would wait for them instead of
	// purging at their pace.
	st, err := store.Open(ctx, cfg.DatabaseURL, 2)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(st.Close)
	reg := prometheus.NewRegistry()
	// A margin of 200 ms (below what the configuration allows: every
	// device's row is written by now, and none logs in for the first time
	// from here on) lets the cleanup purge each user's newly confirmed
	// entries every round, at the rate's limit.
	const margin = 200 * time.Millisecond
	cl, err := archive.NewCleaner(archive.CleanupOptions{Layout: cfg.Layout, Every: 100 * time.Millisecond, Rate: rate,
		Margin: margin, NewDeviceWindow: cfg.NewDeviceWindow, NewDeviceMax: cfg.NewDeviceMax},
		testenv.Logger(b).Named("cleanup"), testnode.Admin(b, n), st, reg)
	if err != nil {
		b.Fatal(err)
	}
	// Warm-up: the load with the cleanup running for longer than its
	// margin (its newest-max bound counts the archive as it was a margin
	// ago: only then does it purge).
	{
		cctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = cl.Run(cctx) }()
		for warm := time.Now(); time.Since(warm) < margin+2*time.Second; {
			sendAll(perPhase/senders/4, fmt.Sprintf("warm%d", time.Now().UnixNano()))
		}
		stop()
		<-done
	}
	purges0 := gathered(b, reg, "inboxd_cleanup_purges_total")
	removed0 := gathered(b, reg, "inboxd_cleanup_entries_removed_total")

	type result struct{ msgsPerSec, drainMs float64 }
	runPhase := func(i, on int) result {
		if on == 1 {
			cctx, stop := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = cl.Run(cctx) }()
			defer func() { stop(); <-done }()
		}
		el := sendAll(perPhase/senders, fmt.Sprintf("p%d-%d", i, on))
		return result{float64(perPhase) / el.Seconds(), float64(catchUp(2*i+on).Microseconds()) / 1000}
	}

	var sendOff, sendOn, drainOff, drainOn, ratio []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var phase [2]result
		order := []int{0, 1} // off, on; every other pair on, off: a drift favours neither
		if i%2 == 1 {
			order = []int{1, 0}
		}
		for _, on := range order {
			phase[on] = runPhase(i, on)
		}
		sendOff, sendOn = append(sendOff, phase[0].msgsPerSec), append(sendOn, phase[1].msgsPerSec)
		drainOff, drainOn = append(drainOff, phase[0].drainMs), append(drainOn, phase[1].drainMs)
		ratio = append(ratio, phase[1].msgsPerSec/phase[0].msgsPerSec)
	}
	b.StopTimer()
	b.ReportMetric(median(sendOff), "off-msgs/s")
	b.ReportMetric(median(sendOn), "on-msgs/s")
	b.ReportMetric(median(ratio), "on/off-sends")
	b.ReportMetric(median(drainOff), "off-drain-ms")
	b.ReportMetric(median(drainOn), "on-drain-ms")
	b.ReportMetric((gathered(b, reg, "inboxd_cleanup_purges_total")-purges0)/float64(b.N), "purges/pair")
	b.ReportMetric((gathered(b, reg, "inboxd_cleanup_entries_removed_total")-removed0)/float64(b.N), "removed/pair")
	b.Logf("sends off %v\nsends on  %v\ndrain off %v\ndrain on  %v", rounded(sendOff), rounded(sendOn), rounded(drainOff), rounded(drainOn))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func rounded(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}

// gathered reads a counter of reg.
func gathered(b *testing.B, reg *prometheus.Registry, name string) float64 {
	b.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}
