package streams_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	defs "github.com/inboxd/inboxd/jetstream"
)

// The files are what an admin feeds to `nats stream add --config FILE` and
// `nats consumer add SEND --config FILE`: the CLI decodes them into the
// server's own config types and sends them to the JetStream API. Do the same
// with the raw bytes.
func TestDefinitionFilesAreAcceptedByTheJetStreamAPI(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, err := nats.Connect(n.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	streamFiles, _ := fs.Glob(defs.FS, "streams/*.json")
	consumerFiles, _ := fs.Glob(defs.FS, "consumers/*.json")
	if len(streamFiles) < 2 || len(consumerFiles) < 1 {
		t.Fatalf("definitions missing: %v %v", streamFiles, consumerFiles)
	}
	for _, f := range streamFiles {
		raw, _ := fs.ReadFile(defs.FS, f)
		var cfg server.StreamConfig
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			t.Fatalf("%s does not decode as a server StreamConfig: %v", f, err)
		}
		resp := apiCall(t, nc, "$JS.API.STREAM.CREATE."+cfg.Name, raw)
		if resp.Error != nil {
			t.Fatalf("%s refused by JetStream: %+v", f, resp.Error)
		}
	}
	for _, f := range consumerFiles {
		raw, _ := fs.ReadFile(defs.FS, f)
		var cfg server.ConsumerConfig
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cfg); err != nil {
			t.Fatalf("%s does not decode as a server ConsumerConfig: %v", f, err)
		}
		// consumers/<STREAM>_<role>.json; INBOX_ files are for partition 0.
		stream, _, _ := strings.Cut(strings.TrimPrefix(f, "consumers/"), "_")
		if stream == "INBOX" {
			stream = "INBOX_0"
		}
		req, _ := json.Marshal(map[string]json.RawMessage{"stream_name": json.RawMessage(`"` + stream + `"`), "config": raw})
		resp := apiCall(t, nc, "$JS.API.CONSUMER.CREATE."+stream+"."+cfg.Durable, req)
		if resp.Error != nil {
			t.Fatalf("%s refused by JetStream: %+v", f, resp.Error)
		}
	}
}

type apiResponse struct {
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

func apiCall(t *testing.T, nc *nats.Conn, subject string, body []byte) apiResponse {
	t.Helper()
	msg, err := nc.Request(subject, body, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	var r apiResponse
	if err := json.Unmarshal(msg.Data, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEnsureCreatesEveryPartitionWithTheFileSettings(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, _ := nats.Connect(n.URL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	l := streams.Layout{InboxPartitions: 5, SendPartitions: 3}
	if err := streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, streams.DefaultReplicas); err != nil {
		t.Fatal(err)
	}
	// Idempotent: a restart runs it again.
	if err := streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, streams.DefaultReplicas); err != nil {
		t.Fatal(err)
	}
	if _, err := streams.EnsureFanoutConsumers(ctx, js, l); err != nil {
		t.Fatal(err)
	}
	for p := 0; p < l.InboxPartitions; p++ {
		s, err := js.Stream(ctx, streams.InboxStream(p))
		if err != nil {
			t.Fatal(err)
		}
		c := s.CachedInfo().Config
		// No MaxAge: the syncer's trimmer enforces the recorded hot window.
		if hw, ok, err := streams.HotWindow(c); err != nil || !ok || hw != streams.DefaultHotWindow {
			t.Fatalf("INBOX_%d hot window %v, %v, %v; want %v recorded", p, hw, ok, err, streams.DefaultHotWindow)
		}
		if c.Retention != jetstream.LimitsPolicy || c.MaxAge != 0 || c.Discard != jetstream.DiscardNew || c.MaxConsumers < 100000 ||
			c.Duplicates != 2*time.Minute || len(c.Subjects) != 1 || c.Subjects[0] != fmt.Sprintf("inbox.%d.*", p) {
			t.Fatalf("INBOX_%d config: %+v", p, c)
		}
	}
	send, err := js.Stream(ctx, streams.SendStream)
	if err != nil {
		t.Fatal(err)
	}
	if send.CachedInfo().Config.Retention != jetstream.WorkQueuePolicy {
		t.Fatalf("SEND retention %v", send.CachedInfo().Config.Retention)
	}
	for p := 0; p < l.SendPartitions; p++ {
		c, err := js.Consumer(ctx, streams.SendStream, streams.FanoutConsumer(p))
		if err != nil {
			t.Fatal(err)
		}
		cc := c.CachedInfo().Config
		if cc.PriorityPolicy != jetstream.PriorityPolicyPinned || cc.FilterSubject != fmt.Sprintf("send.%d.*", p) {
			t.Fatalf("fanout_%d config: %+v", p, cc)
		}
	}
}

func TestEnsureRefusesADifferentPartitionCount(t *testing.T) {
	n := testenv.StartNATS(t)
	nc, _ := nats.Connect(n.URL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	if err := streams.EnsureStreams(ctx, js, streams.Layout{InboxPartitions: 4, SendPartitions: 4}, streams.DefaultHotWindow, streams.DefaultReplicas); err != nil {
		t.Fatal(err)
	}
	err := streams.EnsureStreams(ctx, js, streams.Layout{InboxPartitions: 8, SendPartitions: 4}, streams.DefaultHotWindow, streams.DefaultReplicas)
	if err == nil || !strings.Contains(err.Error(), "fixed at install") {
		t.Fatalf("err = %v, want a refusal", err)
	}
}
