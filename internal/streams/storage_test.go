package streams_test

import (
	"context"
	"testing"

	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
)

// A new installation's fanout consumers keep their state in memory; those
// of an older installation were created on file storage, which JetStream
// cannot change: they keep it, and the start goes on (it neither fails
// nor deletes a SEND consumer, which only admin may).
func TestEnsureConsumerKeepsAnOlderInstallationsStorage(t *testing.T) {
	_, js := testenv.JetStream(t)
	ctx := context.Background()
	l := streams.Layout{InboxPartitions: 2, SendPartitions: 3}
	if err := streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, streams.DefaultReplicas); err != nil {
		t.Fatal(err)
	}
	older, err := streams.FanoutConsumerConfig(1)
	if err != nil {
		t.Fatal(err)
	}
	if !older.MemoryStorage {
		t.Fatal("jetstream/consumers/SEND_fanout.json: mem_storage is not set")
	}
	want := older.MaxAckPending
	older.MemoryStorage, older.MaxAckPending = false, 7
	if _, err := js.CreateConsumer(ctx, streams.SendStream, older); err != nil {
		t.Fatal(err)
	}
	kept, err := streams.EnsureFanoutConsumers(ctx, js, l)
	if err != nil {
		t.Fatalf("ensure over an older installation's consumer: %v", err)
	}
	if len(kept) != 1 || kept[0] != streams.FanoutConsumer(1) {
		t.Fatalf("kept %v, want [%s]", kept, streams.FanoutConsumer(1))
	}
	for p := range l.SendPartitions {
		c, err := js.Consumer(ctx, streams.SendStream, streams.FanoutConsumer(p))
		if err != nil {
			t.Fatal(err)
		}
		cfg := c.CachedInfo().Config
		if mem, want := cfg.MemoryStorage, p != 1; mem != want {
			t.Errorf("%s: memory storage %v, want %v", streams.FanoutConsumer(p), mem, want)
		}
		// The settings other than the storage follow the file.
		if cfg.MaxAckPending != want {
			t.Errorf("%s: max_ack_pending %d, want the file's %d", streams.FanoutConsumer(p), cfg.MaxAckPending, want)
		}
	}
}
