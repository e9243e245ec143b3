package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// BenchmarkEarlyCleanup measures what the early cleanup costs the write
// path and catch-up: the same load with the cleanup off, on at its
// default purge rate (--cleanup-rate 20), and on unpaced (1000 purges/s,
// its worst case), in one run. "on" runs a round every second (the default is
// 10 s: a measurement of seconds would see none) at the default rate;
// "unpaced" every 100 ms. 8 senders write to groups of 8 whose members
// are online and confirm everything, with --new-device-max 10, so that the
// cleanup has confirmed entries to purge all along (after a 4 s warm-up:
// its 2 s margin); then, while a background sender keeps 200 messages/s
// going, devices with a 300-message backlog log in one after another.
// It reports sends (msgs/s, entries/s), catch-up (drain-ms: login to the
// last message, mean and max) and what the cleanup did meanwhile.
//
// Run: go test -run '^$' -bench EarlyCleanup -benchtime 20000x -count 3 ./internal/e2e/
func BenchmarkEarlyCleanup(b *testing.B) {
	for _, mode := range []struct {
		name  string
		every time.Duration // 0: off
		rate  float64
	}{{"off", 0, 0}, {"on", time.Second, config.Defaults().CleanupRate}, {"unpaced", 100 * time.Millisecond, 1000}} {
		b.Run(mode.name, func(b *testing.B) { benchCleanup(b, mode.every, mode.rate) })
	}
}

func benchCleanup(b *testing.B, every time.Duration, rate float64) {
	cfg := testnode.Config(b, testenv.Database(b))
	cfg.Layout = streams.DefaultLayout
	cfg.NewDeviceWindow, cfg.NewDeviceMax = time.Hour, 10
	cfg.CleanupEvery = every
	if every > 0 {
		cfg.CleanupRate, cfg.CleanupMargin = rate, config.MinCleanupMargin
	}
	n := testnode.StartNode(b, cfg, config.RoleAllInOne)
	ctx := context.Background()
	const senders, group, window, catchers, backlog = 8, 8, 256, 10, 300

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
	// Devices that come back to a backlog (their rows exist, at cursor 0).
	directs := make([]int64, catchers)
	for i := range catchers {
		uid := int64(5001 + i)
		directs[i] = createConv(b, n, false, 5000, uid)
		connectDevice(b, n, uid, "catch", deviceOpts{transport: "tcp"}).close()
	}
	for i := range catchers {
		sendN(b, n, 5000, directs[i], backlog, fmt.Sprintf("backlog%d", i))
	}

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
	// Warm-up: past the cleanup's margin, so that it purges during the
	// measurement.
	for warm := time.Now(); time.Since(warm) < 4*time.Second; {
		sendAll(100, fmt.Sprintf("warm%d", time.Now().UnixNano()))
	}
	removed0, purges0 := metric(b, n, "inboxd_cleanup_entries_removed_total"), metric(b, n, "inboxd_cleanup_purges_total")

	b.ResetTimer()
	per := (b.N + senders - 1) / senders
	el := sendAll(per, "bench").Seconds()
	b.StopTimer()
	msgs := float64(per * senders)
	b.ReportMetric(msgs/el, "msgs/s")
	b.ReportMetric(msgs*group/el, "entries/s")
	removedSends := metric(b, n, "inboxd_cleanup_entries_removed_total") - removed0

	// Catch-up with live traffic beside it.
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() {
		defer bg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			clients[i%senders].SendAsync(convs[i%senders], fmt.Sprintf("bg-%d", i), "background")
		}
	}()
	var drains []time.Duration
	for i := range catchers {
		start := time.Now()
		d := connectDevice(b, n, int64(5001+i), "catch", deviceOpts{transport: "tcp"})
		d.waitFor(backlog, 2*time.Minute)
		drains = append(drains, time.Since(start))
		d.close()
	}
	close(stop)
	bg.Wait()
	var sum time.Duration
	for _, d := range drains {
		sum += d
	}
	sort.Slice(drains, func(i, j int) bool { return drains[i] < drains[j] })
	b.ReportMetric(float64(sum.Microseconds())/1000/float64(len(drains)), "drain-ms")
	b.ReportMetric(float64(drains[len(drains)-1].Microseconds())/1000, "drain-max-ms")
	b.ReportMetric(removedSends/el, "removed/s")
	b.ReportMetric(metric(b, n, "inboxd_cleanup_purges_total")-purges0, "purges")
}
