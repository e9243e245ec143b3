package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/wire/pb"
)

// Entry is one inbox entry as stored in JetStream.
type Entry struct {
	Seq   uint64
	MsgID string // Nats-Msg-Id header: <msg_id>:<uid>
	*pb.InboxEntry
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
			e := new(pb.InboxEntry)
			if err := proto.Unmarshal(m.Data(), e); err != nil {
				t.Fatalf("inbox entry of uid %d at seq %d: %v", uid, md.Sequence.Stream, err)
			}
			out = append(out, Entry{Seq: md.Sequence.Stream, MsgID: m.Headers().Get(jetstream.MsgIDHeader), InboxEntry: e})
		}
		if n == 0 && ctx.Err() != nil {
			t.Fatalf("reading inbox of uid %d: got %d of %d entries", uid, len(out), want)
		}
	}
	return out
}
