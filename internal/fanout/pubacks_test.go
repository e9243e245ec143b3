package fanout

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
)

func TestParsePubAck(t *testing.T) {
	for _, c := range []struct {
		data    string
		seq     uint64
		errCode int  // an APIError's err_code
		bad     bool // any other error
		dup     bool
	}{
		{data: `{"stream":"INBOX_3","seq":42}`, seq: 42},
		{data: ` { "stream" : "INBOX_3" , "domain":"hub", "seq" : 7, "duplicate" : true } `, seq: 7, dup: true},
		{data: `{"stream":"INBOX_3","seq":8,"duplicate":false}`, seq: 8},
		{data: `{"stream":"INBOX_3","seq":18446744073709551615}`, seq: 1<<64 - 1},
		{data: `{"stream":"INBOX_3","seq":42,"error":null}`, seq: 42},
		{data: `{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}`, errCode: 10077},
		{data: `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"INBOX_3","seq":0}`, errCode: 10071},
		{data: `{"stream":"INBOX_3"}`, bad: true},
		{data: `{"seq":42}`, bad: true},
		{data: `{"stream":"","seq":42}`, bad: true},
		{data: `{"stream":"INBOX_3","seq":-1}`, bad: true},
		{data: `{"stream":"INBOX_3","seq":4.2}`, bad: true},
		{data: `{"stream":"INBOX_3","seq":42`, bad: true},
		{data: `[]`, bad: true},
		{data: `+OK`, bad: true},
	} {
		seq, dup, err := parsePubAckData([]byte(c.data))
		var api *jetstream.APIError
		switch {
		case c.errCode != 0:
			if !errors.As(err, &api) || int(api.ErrorCode) != c.errCode {
				t.Errorf("%s: %v, want the API error %d", c.data, err, c.errCode)
			}
		case c.bad:
			if err == nil || errors.As(err, &api) {
				t.Errorf("%s: seq %d, %v; want a malformed acknowledgement", c.data, seq, err)
			}
		case err != nil || seq != c.seq || dup != c.dup:
			t.Errorf("%s: seq %d duplicate %v, %v; want %d duplicate %v", c.data, seq, dup, err, c.seq, c.dup)
		}
	}
}

// The acknowledgements of a real server, as nats.go's own publish reads
// them: a stored entry's seq, a deduplicated entry's first seq, a
// server's refusal as an API error, and no stream at all.
func TestAckMuxReadsTheServersAcknowledgements(t *testing.T) {
	nc, js := testenv.JetStream(t)
	ctx := t.Context()
	l := streams.Layout{InboxPartitions: 1, SendPartitions: 1}
	if err := streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, streams.DefaultReplicas); err != nil {
		t.Fatal(err)
	}
	m, err := newAckMux(nc)
	if err != nil {
		t.Fatal(err)
	}
	b := m.batch(8)
	defer b.done()
	msg := func(subject, id string) *nats.Msg {
		h := nats.Header{}
		if id != "" {
			h.Set(jetstream.MsgIDHeader, id)
		}
		return &nats.Msg{Subject: subject, Data: []byte("x"), Header: h}
	}
	refused := msg(streams.InboxSubject(0, 5), "c")
	refused.Header.Set(jetstream.ExpectedLastSeqHeader, "99") // the stream's last is 2
	var buf []byte
	for i, nm := range []*nats.Msg{
		msg(streams.InboxSubject(0, 5), "a"),
		msg(streams.InboxSubject(0, 6), "b"),
		msg(streams.InboxSubject(0, 5), "a"), // a repeat: deduplicated
		refused,
		msg("nostream.here", ""),
	} {
		if buf, err = b.publish(nm, i, buf); err != nil {
			t.Fatal(err)
		}
	}
	got := map[int]ackResult{}
	for len(got) < 5 {
		select {
		case r := <-b.results:
			got[r.i] = r
		case <-time.After(10 * time.Second):
			t.Fatalf("acknowledgements %v of 5", got)
		}
	}
	for i, want := range []uint64{1, 2, 1} {
		if got[i].err != nil || got[i].seq != want {
			t.Errorf("entry %d: seq %d, %v; want %d", i, got[i].seq, got[i].err, want)
		}
	}
	var api *jetstream.APIError
	if !errors.As(got[3].err, &api) || api.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Errorf("refused entry: %v, want the API error 10071 (wrong last sequence)", got[3].err)
	}
	// The jetstream package's own error: its matching by code works.
	if !errors.Is(got[3].err, &jetstream.APIError{ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}) {
		t.Errorf("refused entry: errors.Is does not match it by its code: %#v", got[3].err)
	}
	if !errors.Is(got[4].err, jetstream.ErrNoStreamResponse) {
		t.Errorf("entry to no stream: %v, want %v", got[4].err, jetstream.ErrNoStreamResponse)
	}
}
