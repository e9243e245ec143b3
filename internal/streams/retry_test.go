package streams_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
)

// A STREAM.INFO request that goes unanswered (a stream between leaders
// right after a rescale, the failure of `inboxctl streams set` in a CI
// run) is sent again after its own timeout, instead of waiting for the
// whole of the caller's deadline. The API is reached through a prefix
// whose first request is dropped and later ones are passed on to the real
// server, with its real answer.
func TestLookupRetriesAnUnansweredRequest(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	var seen atomic.Int32
	sub, err := nc.Subscribe("LOSSY.STREAM.INFO.S", func(m *nats.Msg) {
		if seen.Add(1) == 1 {
			return // lost
		}
		r, err := nc.Request("$JS.API.STREAM.INFO.S", m.Data, 5*time.Second)
		if err != nil {
			t.Error(err)
			return
		}
		m.Respond(r.Data)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	lossy, err := jetstream.NewWithAPIPrefix(nc, "LOSSY")
	if err != nil {
		t.Fatal(err)
	}

	defer streams.SetTryTimeout(300 * time.Millisecond)()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := streams.Lookup(ctx, lossy, "S")
	if err != nil {
		t.Fatalf("look-up with its first request lost: %v", err)
	}
	if s.CachedInfo().Config.Name != "S" || seen.Load() < 2 {
		t.Fatalf("look-up answered %q after %d requests, want S after at least 2", s.CachedInfo().Config.Name, seen.Load())
	}
	if ctx.Err() != nil {
		t.Fatal("the look-up waited out the caller's deadline")
	}

	if _, err := streams.Lookup(ctx, js, "NOPE"); err != jetstream.ErrStreamNotFound {
		t.Fatalf("look-up of a missing stream: %v, want ErrStreamNotFound at once", err)
	}
}
