package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/natsconn"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
)

// The consumer's state read with the core client gives the numbers the
// jetstream package decodes from the same answer, at every step of a
// consumer's life (nothing delivered, delivered and unacknowledged, part
// acknowledged); a consumer that is not there is ErrConsumerNotFound (the
// login creates it), and a malformed answer is an error, never a zero
// state.
func TestConsumerStateMatchesTheJetStreamPackage(t *testing.T) {
	nc, js := testenv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "CIT", Subjects: []string{"cit.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 7; i++ {
		if _, err := js.Publish(ctx, "cit.a", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.CreateConsumer(ctx, "CIT", jetstream.ConsumerConfig{Durable: "d1", AckPolicy: jetstream.AckAllPolicy}); err != nil {
		t.Fatal(err)
	}
	dc := &deviceConsumer{consumerEnv: &consumerEnv{js: js, nc: nc}, stream: "CIT", name: "d1"}
	same := func(step string) consumerState {
		t.Helper()
		got, err := dc.state(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		c, err := js.Consumer(ctx, "CIT", "d1")
		if err != nil {
			t.Fatal(err)
		}
		if want := stateOf(c.CachedInfo()); got != want {
			t.Fatalf("%s: state %+v, the jetstream package read %+v", step, got, want)
		}
		return got
	}
	if s := same("nothing delivered"); s.NumPending != 7 {
		t.Fatalf("nothing delivered: %+v, want 7 pending", s)
	}
	got, err := dc.pull(ctx, 5, 2*time.Second)
	if err != nil || len(got) != 5 {
		t.Fatalf("pull 5: %d, %v", len(got), err)
	}
	if s := same("5 delivered"); s.NumAckPending != 5 || s.Delivered.Stream != 5 || s.NumPending != 2 {
		t.Fatalf("5 delivered: %+v", s)
	}
	if err := dc.ack(got[2].reply); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFloor(t, ctx, dc, 3)
	if s := same("3 acknowledged"); s.AckFloor != (seqPair{3, 3}) || s.NumAckPending != 2 {
		t.Fatalf("3 acknowledged: %+v", s)
	}

	// A reset with the core client answers what the jetstream package's
	// does: the state after it and where it went (to the ack floor, then
	// to a sequence, on a second consumer in the same state as the first).
	if _, err := js.CreateConsumer(ctx, "CIT", jetstream.ConsumerConfig{Durable: "d2", AckPolicy: jetstream.AckAllPolicy}); err != nil {
		t.Fatal(err)
	}
	dc2 := &deviceConsumer{consumerEnv: &consumerEnv{js: js, nc: nc}, stream: "CIT", name: "d2"}
	got2, err := dc2.pull(ctx, 5, 2*time.Second)
	if err != nil || len(got2) != 5 {
		t.Fatalf("pull 5 of d2: %d, %v", len(got2), err)
	}
	if err := dc2.ack(got2[2].reply); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFloor(t, ctx, dc2, 3)
	for _, seq := range []uint64{0, 6} {
		st, rs, err := dc.reset(ctx, seq)
		if err != nil {
			t.Fatalf("reset to %d: %v", seq, err)
		}
		var r *jetstream.ConsumerResetResponse
		if seq == 0 {
			r, err = js.ResetConsumer(ctx, "CIT", "d2")
		} else {
			r, err = js.ResetConsumerToSequence(ctx, "CIT", "d2", seq)
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := stateOf(r.ConsumerInfo); st != want || rs != r.ResetSeq {
			t.Fatalf("reset to %d: state %+v reset_seq %d, the jetstream package read %+v %d", seq, st, rs, want, r.ResetSeq)
		}
		if seq == 0 && (rs != 4 || st.NumAckPending != 0 || st.NumPending != 4) {
			t.Fatalf("reset to the floor: %+v reset_seq %d, want 4 pending from 4", st, rs)
		}
	}

	// A reset the server refuses (to a sequence, on a consumer that
	// delivers only new entries) is ErrConsumerInvalidReset, as the
	// jetstream package says it.
	if _, err := js.CreateConsumer(ctx, "CIT", jetstream.ConsumerConfig{Durable: "d3", AckPolicy: jetstream.AckAllPolicy, DeliverPolicy: jetstream.DeliverNewPolicy}); err != nil {
		t.Fatal(err)
	}
	dc3 := &deviceConsumer{consumerEnv: &consumerEnv{js: js, nc: nc}, stream: "CIT", name: "d3"}
	if _, _, err := dc3.reset(ctx, 2); !errors.Is(err, jetstream.ErrConsumerInvalidReset) {
		t.Fatalf("a refused reset: %v, want ErrConsumerInvalidReset", err)
	}
	if _, err := js.ResetConsumerToSequence(ctx, "CIT", "d3", 2); !errors.Is(err, jetstream.ErrConsumerInvalidReset) {
		t.Fatalf("the jetstream package's refused reset: %v, want ErrConsumerInvalidReset", err)
	}

	if err := js.DeleteConsumer(ctx, "CIT", "d1"); err != nil {
		t.Fatal(err)
	}
	// The consumer itself answers resets: one that is gone leaves the
	// request unanswered (lost() then asks for its info, which says gone).
	shortCtx, shortCancel := context.WithTimeout(ctx, time.Second)
	_, _, err = dc.reset(shortCtx, 0)
	shortCancel()
	if !natsconn.Unanswered(err) {
		t.Fatalf("reset of a deleted consumer: %v, want it unanswered", err)
	}
	if _, err := dc.state(ctx); !errors.Is(err, jetstream.ErrConsumerNotFound) || !gone(err) {
		t.Fatalf("state of a deleted consumer: %v, want ErrConsumerNotFound", err)
	}

	for _, bad := range []string{``, `{"type":"io.nats.jetstream.api.v1.consumer_info_response","num_pending":"x"}`, `{"type":"io.nats.jetstream.api.v1.stream_info_response"}`, `{"error":{"code":503,"err_code":10119,"description":"consumer is offline"}}`} {
		if s, err := parseConsumerInfo([]byte(bad)); err == nil {
			t.Errorf("answer %q read as %+v", bad, s)
		}
	}
	if _, err := parseConsumerInfo([]byte(`{"type":"io.nats.jetstream.api.v1.consumer_info_response","error":{"code":503,"err_code":10119,"description":"consumer is offline"}}`)); !offline(err) {
		t.Errorf("an offline consumer's answer: %v, not offline", err)
	}
}

// The answer of a device consumer's info as the server sends it, read by
// the jetstream package (its lookup: the whole ConsumerInfo and a handle)
// and by state.
func BenchmarkConsumerInfoAnswer(b *testing.B) {
	nc, js := testenv.JetStream(b)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streams.InboxStream(0), Subjects: []string{streams.InboxSubject(0, 42)}}); err != nil {
		b.Fatal(err)
	}
	cfg, err := streams.DeviceConsumerConfig(0, 42, "phone", 1, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, streams.InboxStream(0), cfg); err != nil {
		b.Fatal(err)
	}
	m, err := nc.Request(consumerInfoSubject(streams.InboxStream(0), cfg.Durable), nil, 5*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("an answer of %d bytes", len(m.Data))
	b.Run("jetstream", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var resp struct {
				jetstream.APIError
				*jetstream.ConsumerInfo
				Error *jetstream.APIError `json:"error"`
			}
			if err := json.Unmarshal(m.Data, &resp); err != nil || resp.ConsumerInfo == nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("state", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseConsumerInfo(m.Data); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// parseConsumerInfoJSON is parseConsumerInfo written with encoding/json:
// the members of the object by their exact keys (the last of a key given
// twice), each of the five decoded into its type.
func parseConsumerInfoJSON(data []byte) (consumerState, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return consumerState{}, err
	}
	var st consumerState
	pair := func(raw json.RawMessage) (seqPair, error) {
		var m map[string]json.RawMessage
		var p seqPair
		if raw == nil {
			return p, nil
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return p, err
		}
		if err := json.Unmarshal(orNull(m["consumer_seq"]), &p.Consumer); err != nil {
			return p, err
		}
		return p, json.Unmarshal(orNull(m["stream_seq"]), &p.Stream)
	}
	var err error
	if st.Delivered, err = pair(top["delivered"]); err != nil {
		return st, err
	}
	if st.AckFloor, err = pair(top["ack_floor"]); err != nil {
		return st, err
	}
	if err := json.Unmarshal(orNull(top["num_ack_pending"]), &st.NumAckPending); err != nil {
		return st, err
	}
	if err := json.Unmarshal(orNull(top["num_pending"]), &st.NumPending); err != nil {
		return st, err
	}
	if e := top["error"]; e != nil && string(e) != "null" {
		var ae jetstream.APIError
		if err := json.Unmarshal(e, &ae); err != nil {
			return st, err
		}
		return st, &ae
	}
	var typ string
	if err := json.Unmarshal(orNull(top["type"]), &typ); err != nil {
		return st, err
	}
	if typ != consumerInfoType {
		return st, fmt.Errorf("type %q", typ)
	}
	return st, nil
}

func orNull(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return json.RawMessage("null")
	}
	return raw
}

// Every valid JSON document is read by parseConsumerInfo as encoding/json
// reads it (the same state, or an error from both); an invalid one does
// not panic. The seeds: a server's answer, its not-found error, and
// shapes around the fields read.
func FuzzParseConsumerInfo(f *testing.F) {
	for _, s := range []string{
		`{"type":"io.nats.jetstream.api.v1.consumer_info_response","stream_name":"INBOX_0","name":"d_42_phone","created":"2026-12-04T18:00:00.1Z","config":{"durable_name":"d_42_phone","description":"a \"quoted\" {brace} [x]","filter_subject":"inbox.0.42","metadata":{"k":"v"},"backoff":[1,2]},"delivered":{"consumer_seq":12,"stream_seq":340,"last_active":"2026-12-04T18:00:01Z"},"ack_floor":{"consumer_seq":10,"stream_seq":338},"num_ack_pending":2,"num_redelivered":0,"num_waiting":0,"num_pending":7,"cluster":{"leader":"n1","replicas":[{"name":"n2","current":true}]},"ts":"2026-12-04T18:00:02Z"}`,
		`{"type":"io.nats.jetstream.api.v1.consumer_info_response","error":{"code":404,"err_code":10014,"description":"consumer not found"}}`,
		` { "type" : "io.nats.jetstream.api.v1.consumer_info_response" , "num_pending" : null, "delivered": null , "\u0074ype":"io.nats.jetstream.api.v1.consumer_info_response"} `,
		`{"type":"io.nats.jetstream.api.v1.consumer_info_response","num_ack_pending":-3,"num_pending":18446744073709551615}`,
		`{"type":"io.nats.jetstream.api.v1.consumer_info_response","num_pending":18446744073709551616}`,
		`{"type":"io.nats.jetstream.api.v1.consumer_info_response","num_pending":"x","num_pending":1,"delivered":{"stream_seq":1.5}}`,
		`{"type":"x","error":null}`,
		`[]`, `null`, `{}`, `{"a":}`, `{"type":"io.nats.jetstream.api.v1.consumer_info_response"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseConsumerInfo(data)
		if !json.Valid(data) {
			return
		}
		want, werr := parseConsumerInfoJSON(data)
		switch {
		case (err == nil) != (werr == nil):
			t.Fatalf("%q: read %+v, %v; encoding/json %+v, %v", data, got, err, want, werr)
		case err == nil && got != want:
			t.Fatalf("%q: read %+v; encoding/json %+v", data, got, want)
		}
	})
}

// A consumer info request that its server took and never answers (killed
// right after it read it) ends after apiTimeout even on a context without
// a deadline, a session's: it held the session's backfill until the
// session ended.
func TestConsumerInfoUnansweredEnds(t *testing.T) {
	// A server without JetStream and a responder that reads the request
	// and never answers, as a server killed right after it read it.
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	defer ns.Shutdown()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	sub, err := nc.SubscribeSync(consumerInfoSubject("GONE", "d1"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	dc := &deviceConsumer{consumerEnv: &consumerEnv{js: js, nc: nc}, stream: "GONE", name: "d1"}
	ctx := newCloseCtx() // no deadline, as a session's
	defer ctx.close()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := dc.info(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("unanswered info: %v after %s, want a deadline error", err, time.Since(start).Round(time.Millisecond))
		}
	case <-time.After(apiTimeout + 5*time.Second):
		t.Fatalf("unanswered info still waiting after %s", time.Since(start).Round(time.Second))
	}
	if _, err := sub.NextMsg(time.Second); err != nil {
		t.Fatalf("the request never reached the responder: %v", err)
	}
}
