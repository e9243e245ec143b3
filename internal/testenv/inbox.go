package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/streams"
)

// Entry is one inbox entry as stored in JetStream, decoded by streams.
type Entry struct {
	Seq      uint64
	DedupeID string // Nats-Msg-Id header (streams.MessageDedupeID for a message)
	streams.Entry
}

// InboxEntries reads every entry of uid's inbox straight from its INBOX
// partition, in stream order.
func InboxEntries(t testing.TB, nc *nats.Conn, l streams.Layout, uid int64) []Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := ids.Partition(uid, l.InboxPartitions)
	cons, err := js.OrderedConsumer(ctx, streams.InboxStream(p), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{streams.InboxSubject(p, uid)},
	})
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := info.NumPending
	var out []Entry
	for uint64(len(out)) < want {
		batch, err := cons.Fetch(int(min(want-uint64(len(out)), 1000)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				t.Fatal(err)
			}
			e, err := streams.DecodeEntry(m.Data())
			if err != nil {
				t.Fatalf("inbox entry of uid %d at seq %d: %v", uid, md.Sequence.Stream, err)
			}
			out = append(out, Entry{Seq: md.Sequence.Stream, DedupeID: m.Headers().Get(jetstream.MsgIDHeader), Entry: e})
		}
		if n == 0 && ctx.Err() != nil {
			t.Fatalf("reading inbox of uid %d: got %d of %d entries", uid, len(out), want)
		}
	}
	return out
}
