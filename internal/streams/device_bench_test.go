package streams_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
)

// BenchmarkDeviceConsumerStorage measures what one device consumer costs
// the NATS server (embedded: the process's Go heap is the server's), with
// file and with memory storage: b.N consumers, the heap in use and the
// store's files per consumer, and the server's shutdown and start with
// them. The choice of memory storage (jetstream/consumers/
// INBOX_device.json) rests on it and on `inboxbench devices` (docs/benchmarks.md):
//
//	go test -run '^$' -bench DeviceConsumerStorage -benchtime 5000x ./internal/streams/
func BenchmarkDeviceConsumerStorage(b *testing.B) {
	for _, tc := range []struct {
		name string
		mem  bool
	}{{"file", false}, {"memory", true}} {
		b.Run(tc.name, func(b *testing.B) {
			n := testenv.StartNATS(b)
			nc, err := nats.Connect(n.URL())
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			js, _ := jetstream.New(nc)
			ctx := context.Background()
			if err := streams.EnsureStreams(ctx, js, streams.Layout{InboxPartitions: 1, SendPartitions: 1}, streams.DefaultHotWindow, 1); err != nil {
				b.Fatal(err)
			}
			files0, heap0 := storeFiles(n.Dir), heapInUse()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cfg, err := streams.DeviceConsumerConfig(0, int64(i), "d", 0, time.Hour)
				if err != nil {
					b.Fatal(err)
				}
				cfg.MemoryStorage = tc.mem
				if _, err := js.CreateConsumer(ctx, streams.InboxStream(0), cfg); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			files1, heap1 := storeFiles(n.Dir), heapInUse()
			nc.Close()
			t0 := time.Now()
			n.Stop()
			stop := time.Since(t0)
			t0 = time.Now()
			n.Start()
			start := time.Since(t0)
			b.ReportMetric(float64(heap1-heap0)/float64(b.N), "heap-B/consumer")
			b.ReportMetric(float64(files1-files0)/float64(b.N), "files/consumer")
			b.ReportMetric(float64(stop.Milliseconds()), "shutdown-ms")
			b.ReportMetric(float64(start.Milliseconds()), "start-ms")
		})
	}
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

func storeFiles(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			n++
		}
		return nil
	})
	return n
}
