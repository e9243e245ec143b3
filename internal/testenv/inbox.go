package testenv

import (
	"context"
	"fmt"
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
	out, err := ReadInboxEntries(nc, l, uid, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ReadInboxEntries is InboxEntries returning its error. A read that
// meets entries removed while it runs (a purge by the trimmer or the early
// cleanup) fails after wait instead of waiting for them, so that a caller
// polling a stream being cleaned can read again.
func ReadInboxEntries(nc *nats.Conn, l streams.Layout, uid int64, wait time.Duration) ([]Entry, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	p := ids.Partition(uid, l.InboxPartitions)
	cons, err := js.OrderedConsumer(ctx, streams.InboxStream(p), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{streams.InboxSubject(p, uid)},
	})
	if err != nil {
		return nil, err
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, err
	}
	want := info.NumPending
	var out []Entry
	for uint64(len(out)) < want {
		batch, err := cons.Fetch(int(min(want-uint64(len(out)), 1000)), jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			e, err := streams.DecodeEntry(m.Data())
			if err != nil {
				return nil, fmt.Errorf("inbox entry of uid %d at seq %d: %w", uid, md.Sequence.Stream, err)
			}
			out = append(out, Entry{Seq: md.Sequence.Stream, DedupeID: m.Headers().Get(jetstream.MsgIDHeader), Entry: e})
		}
		if n == 0 && ctx.Err() != nil {
			return nil, fmt.Errorf("reading inbox of uid %d: got %d of %d entries", uid, len(out), want)
		}
	}
	return out, nil
}
