package gateway

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/testenv"
)

// The pull request made without a jetstream.Consumer handle, against a
// real JetStream server: deliveries in order with the sequences of their
// ack subjects, a short pull that expires with what there was, acks that
// move the ack floor (AckPolicy all), and a deleted consumer reported as
// the session's recovery expects it (gone).
func TestPullDeliversAcksAndReportsGone(t *testing.T) {
	nc, js := testenv.JetStream(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PULLT", Subjects: []string{"pullt.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		if _, err := js.Publish(ctx, "pullt.a", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.CreateConsumer(ctx, "PULLT", jetstream.ConsumerConfig{Durable: "d1", AckPolicy: jetstream.AckAllPolicy}); err != nil {
		t.Fatal(err)
	}
	dc := &deviceConsumer{consumerEnv: &consumerEnv{js: js, nc: nc}, stream: "PULLT", name: "d1"}

	got, err := dc.pull(ctx, 3, 2*time.Second)
	if err != nil || len(got) != 3 {
		t.Fatalf("pull 3 of 5: %d deliveries, %v", len(got), err)
	}
	for i, d := range got {
		if d.streamSeq != uint64(i+1) || d.consumerSeq != uint64(i+1) || d.pending != uint64(4-i) || string(d.data) != fmt.Sprintf("m%d", i+1) || d.subject != "pullt.a" {
			t.Errorf("delivery %d: stream %d consumer %d pending %d %q on %q", i, d.streamSeq, d.consumerSeq, d.pending, d.data, d.subject)
		}
	}
	if err := dc.ack(got[2].reply); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	waitFloor(t, ctx, dc, 3)

	start := time.Now()
	rest, err := dc.pull(ctx, 10, 300*time.Millisecond)
	if err != nil || len(rest) != 2 || rest[0].streamSeq != 4 || rest[1].streamSeq != 5 {
		t.Fatalf("pull 10 of the 2 left: %+v, %v", rest, err)
	}
	if el := time.Since(start); el > 300*time.Millisecond+pullExtra {
		t.Errorf("an unfilled pull waited %v, past its expiry and the grace", el)
	}

	if err := js.DeleteConsumer(ctx, "PULLT", "d1"); err != nil {
		t.Fatal(err)
	}
	_, err = dc.pull(ctx, 1, time.Second)
	if err == nil || !dc.lost(ctx, err) {
		t.Fatalf("pull on a deleted consumer: %v; the session would not recreate it", err)
	}
	t.Logf("pull on a deleted consumer: %v", err)
}

func waitFloor(t *testing.T, ctx context.Context, dc *deviceConsumer, want uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ci, err := dc.info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if ci.AckFloor.Stream == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ack floor %d, want %d", ci.AckFloor.Stream, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ack subjects of both layouts, and malformed ones refused with an error.
func TestParseDelivery(t *testing.T) {
	for _, tc := range []struct {
		reply            string
		sseq, cseq, pend uint64
		bad              bool
	}{
		{reply: "$JS.ACK.S.C.1.40.7.1700000000.3", sseq: 40, cseq: 7, pend: 3},
		{reply: "$JS.ACK._.ACCHASH.S.C.2.41.8.1700000000.2.rnd", sseq: 41, cseq: 8, pend: 2},
		{reply: "$JS.ACK.dom.ACCHASH.S.C.2.42.9.1700000000.0", sseq: 42, cseq: 9, pend: 0},
		{reply: "_INBOX.x", bad: true},
		{reply: "$JS.ACK.S.C.1.40.7", bad: true},
		{reply: "$JS.ACK.S.C.1.40.7.1700000000.3.x", bad: true}, // 10 tokens: neither layout
		{reply: "$JS.ACK.S.C.1.x.7.1700000000.3", bad: true},
	} {
		d, err := parseDelivery(&nats.Msg{Reply: tc.reply})
		if tc.bad {
			if err == nil {
				t.Errorf("%s: parsed as %+v, want an error", tc.reply, d)
			}
			continue
		}
		if err != nil || d.streamSeq != tc.sseq || d.consumerSeq != tc.cseq || d.pending != tc.pend || d.reply != tc.reply {
			t.Errorf("%s: %+v, %v", tc.reply, d, err)
		}
	}
}

// Status messages end a pull with the jetstream package's error for them,
// or with none for an expired or empty request; a heartbeat does not end
// it, and a delivery is no status.
func TestPullStatus(t *testing.T) {
	st := func(code, descr string) *nats.Msg {
		return &nats.Msg{Header: nats.Header{"Status": []string{code}, "Description": []string{descr}}}
	}
	for _, tc := range []struct {
		m              *nats.Msg
		isStatus, ends bool
		err            error
	}{
		{&nats.Msg{Data: []byte("x"), Reply: "$JS.ACK.S.C.1.1.1.1.0"}, false, false, nil},
		{st("408", "Request Timeout"), true, true, nil},
		{st("404", "No Messages"), true, true, nil},
		{st("100", "Idle Heartbeat"), true, false, nil},
		{st("503", ""), true, true, nats.ErrNoResponders},
		{st("409", "Consumer Deleted"), true, true, jetstream.ErrConsumerDeleted},
	} {
		isStatus, ends, err := pullStatus(tc.m)
		if isStatus != tc.isStatus || ends != tc.ends || err != tc.err {
			t.Errorf("%v: status %v ends %v err %v; want %v %v %v", tc.m.Header, isStatus, ends, err, tc.isStatus, tc.ends, tc.err)
		}
	}
	if _, ends, err := pullStatus(st("409", "Exceeded MaxWaiting")); !ends || err == nil {
		t.Errorf("an unknown conflict: ends %v err %v, want an error that ends the pull", ends, err)
	}
}
