package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/push"
	"github.com/inboxd/inboxd/internal/push/bridge"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
)

// A recipient with no device connected gets one push event for its first
// message, as soon as it is decided; the messages after it inside the
// collapse window make exactly one more event at the window's end, which
// covers them all and carries the newest unread count. The bridge delivers
// both to the relay (a real HTTP server) with every field, the event id as
// the idempotency key, a valid signature and no body; nothing more follows.
func TestPushOfflineRecipientOneEventPerCollapseWindow(t *testing.T) {
	const after, collapse = time.Second, 3 * time.Second
	e := startPushEnv(t, after, collapse)
	rl := newRelay(t, nil)
	e.startBridge(rl, bridge.Options{})
	conv := e.conv(false, 1, 2)

	first := e.send(1, conv, 1, "first")
	acc := rl.waitAccepted(t, 1, 30*time.Second)
	ev := acc[0].ev
	want := push.Event{ID: "2:1", N: 1, UID: 2, CollapseKey: "inboxd:2", ConvID: conv, SenderUID: 1, MsgID: first[0], ConvSeq: 1,
		Messages: 1, Conversations: 1, Unread: 1, ConvUnread: 1}
	ev.SentAtMs, ev.CreatedAtMs = 0, 0
	if ev != want {
		t.Fatalf("first push event\n got %+v\nwant %+v", ev, want)
	}
	checkRequest(t, acc[0])

	// Three more inside the window: folded into one event.
	more := e.send(1, conv, 3, "more")
	acc = rl.waitAccepted(t, 2, 30*time.Second)
	second := acc[1].ev
	if second.ID != "2:2" || second.Messages != 3 || second.MsgID != more[2] || second.ConvSeq != 4 || second.Unread != 4 || second.ConvUnread != 4 {
		t.Fatalf("second push event %+v: want id 2:2 covering the 3 messages of the window, newest msg_id %d at conv_seq 4, unread 4", second, more[2])
	}
	if gap := time.Duration(second.CreatedAtMs-acc[0].ev.CreatedAtMs) * time.Millisecond; gap < collapse {
		t.Fatalf("second event %s after the first: inside the collapse window %s", gap, collapse)
	}
	checkRequest(t, acc[1])

	// Nothing else: each of the 4 messages is covered by exactly one event.
	time.Sleep(after + collapse + time.Second)
	reqs, acc := rl.got()
	if len(reqs) != 2 || len(acc) != 2 {
		t.Fatalf("relay got %d requests (%d accepted), want the 2 events", len(reqs), len(acc))
	}
	if evs := e.events(); len(evs) != 2 {
		t.Fatalf("PUSH holds %d events, want 2: %+v", len(evs), evs)
	}
	if got := e.outcome(push.OutcomePushed); got != 4 {
		t.Fatalf("%v messages pushed, want 4", got)
	}
	if got := e.outcome(push.OutcomeOwn); got != 4 {
		t.Fatalf("%v of the sender's own copies seen, want 4 (none pushed)", got)
	}
}

// checkRequest checks the webhook contract of one delivery: JSON, the
// event's id as the idempotency key, an HMAC signature over "t.body", no
// message text without --push-body.
func checkRequest(t *testing.T, r relayReq) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if k := r.header.Get(bridge.HeaderIdempotencyKey); k != r.ev.ID {
		t.Errorf("Idempotency-Key %q, event id %q", k, r.ev.ID)
	}
	sig := r.header.Get(bridge.HeaderSignature)
	var ts int64
	if _, err := fmt.Sscanf(sig, "t=%d,", &ts); err != nil {
		t.Fatalf("signature %q: %v", sig, err)
	}
	if want := bridge.Sign(testWebhookSecret, time.Unix(ts, 0), r.body); sig != want {
		t.Errorf("signature %q, want %q", sig, want)
	}
	if r.ev.Body != "" || strings.Contains(string(r.body), `"body"`) {
		t.Errorf("a push event carries the text without --push-body: %s", r.body)
	}
}

// A recipient whose device is connected and confirms gets no push; a
// member of the same group with no device connected does (the control:
// the pusher ran and decided both).
func TestPushOnlineConfirmingRecipientNoPush(t *testing.T) {
	const after, collapse = 2 * time.Second, time.Second
	e := startPushEnv(t, after, collapse)
	conv := e.conv(true, 1, 2, 3)
	online := connectDevice(t, e.gw, 2, "phone", deviceOpts{})
	e.send(1, conv, 5, "g")
	online.waitFor(5, 20*time.Second)
	checkFor(t, 30*time.Second, func() error {
		if got := e.outcome(push.OutcomePushed); got != 5 {
			return fmt.Errorf("%v messages pushed (to uid 3, offline), want 5", got)
		}
		return nil
	})
	time.Sleep(after + collapse)
	for _, ev := range e.events() {
		if ev.UID != 3 {
			t.Fatalf("push event for uid %d, whose device confirmed every message: %+v", ev.UID, ev)
		}
	}
	if got := e.outcome(push.OutcomeConfirmed); got != 5 {
		t.Fatalf("%v messages decided as confirmed, want uid 2's 5", got)
	}
}

// Only messages the recipient has not read push: the sender's own copy,
// the read_sync and receipt entries a read writes, and a message the
// recipient read (on a device that stored it and did not confirm in
// time) do not. The next unread message does (the control).
func TestPushSkipsOwnCopyEventsAndReadMessages(t *testing.T) {
	const after, collapse = 2 * time.Second, 0
	e := startPushEnv(t, after, collapse)
	conv := e.conv(false, 1, 2)
	reader := connectDevice(t, e.gw, 2, "web", deviceOpts{noAck: true})
	e.send(1, conv, 1, "read-me")
	reader.waitFor(1, 20*time.Second)
	if _, err := reader.c.Read(ctxT(t, 10*time.Second), conv, 1); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 30*time.Second, func() error {
		if e.outcome(push.OutcomeRead) != 1 || e.outcome(push.OutcomeEvent) < 2 || e.outcome(push.OutcomeOwn) != 1 {
			return fmt.Errorf("outcomes read %v, event %v, own %v: want the read message, the read_sync and receipt entries, the sender's copy",
				e.outcome(push.OutcomeRead), e.outcome(push.OutcomeEvent), e.outcome(push.OutcomeOwn))
		}
		return nil
	})
	if evs := e.events(); len(evs) != 0 {
		t.Fatalf("push events for a read message, the sender's copy or events: %+v", evs)
	}
	unread := e.send(1, conv, 1, "unread")
	checkFor(t, 30*time.Second, func() error {
		if evs := e.events(); len(evs) != 1 || evs[0].MsgID != unread[0] || evs[0].Unread != 1 {
			return fmt.Errorf("push events %+v: want one for the unread message, unread 1", evs)
		}
		return nil
	})
}

// A send retried with the same client_msg_id and an inbox entry handed to
// the pusher again (its consumer reset to the start, as after a lost ack
// or a syncer's restart) push once: the retry is the same message, and a
// redelivered entry is covered by the event that pushed it.
func TestPushRetriedSendAndRedeliveredEntryPushOnce(t *testing.T) {
	const after, collapse = time.Second, 0
	e := startPushEnv(t, after, collapse)
	conv := e.conv(false, 1, 2)
	c, err := client.Dial(ctxT(t, 20*time.Second), client.Options{URL: "tcp://" + e.gw.Gateway.TCPAddr(), Token: testenv.Token(t, 1, "phone")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r1, err := c.Send(ctxT(t, 20*time.Second), conv, "retried-1", "hello")
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Send(ctxT(t, 20*time.Second), conv, "retried-1", "hello")
	if err != nil || r2.MsgID != r1.MsgID {
		t.Fatalf("retried send: %+v, %v; want msg_id %d again", r2, err, r1.MsgID)
	}
	checkFor(t, 30*time.Second, func() error {
		if evs := e.events(); len(evs) != 1 {
			return fmt.Errorf("%d push events, want 1", len(evs))
		}
		return nil
	})
	// Redeliver uid 2's partition from its first entry.
	part := partitionOf(2)
	ctx := ctxT(t, 10*time.Second)
	if _, err := e.ajs.ResetConsumerToSequence(ctx, "INBOX_"+strconv.Itoa(part), "push", 1); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 30*time.Second, func() error {
		if got := e.outcome(push.OutcomeCovered) + e.outcome(push.OutcomePushed); got < 2 {
			return fmt.Errorf("the redelivered entry was not decided again yet (%v decided)", got)
		}
		return nil
	})
	time.Sleep(time.Second)
	if evs := e.events(); len(evs) != 1 || evs[0].MsgID != r1.MsgID || evs[0].Messages != 1 {
		t.Fatalf("%d push events after a retried send and a redelivery: %+v; want the one event of msg_id %d", len(evs), evs, r1.MsgID)
	}
	if got := e.outcome(push.OutcomeCovered); got != 1 {
		t.Fatalf("the redelivered entry decided %v times as covered, want 1", got)
	}
}

// An event recorded and not known to be published when the syncer stopped
// (push_state.pending) is published again by the next syncer under the
// same Nats-Msg-Id: the stream's duplicate window keeps one.
func TestPushRecordedEventRepublishedOnceAfterRestart(t *testing.T) {
	const after, collapse = time.Second, 0
	e := startPushEnv(t, after, collapse)
	conv := e.conv(false, 1, 2)
	e.send(1, conv, 1, "x")
	checkFor(t, 30*time.Second, func() error {
		if evs := e.events(); len(evs) != 1 {
			return fmt.Errorf("%d push events, want 1", len(evs))
		}
		return nil
	})
	ev := e.events()[0]
	// The syncer stops between the publish and clearing pending.
	e.stopSyncer()
	payload := mustJSON(t, ev)
	if _, err := e.gw.Store.Pool.Exec(context.Background(), `UPDATE push_state SET pending = $2 WHERE uid = $1`, ev.UID, string(payload)); err != nil {
		t.Fatal(err)
	}
	e.startSyncer()
	checkFor(t, 30*time.Second, func() error {
		if n := count(t, e.gw, `SELECT count(*) FROM push_state WHERE pending IS NOT NULL`); n != 0 {
			return fmt.Errorf("%d events still pending after the restart", n)
		}
		return nil
	})
	if evs := e.events(); len(evs) != 1 {
		t.Fatalf("%d push events after the restart republished the pending one, want 1: %+v", len(evs), evs)
	}
}

// A relay that fails (500) and then recovers gets the event once it
// answers 2xx, after the bridge's retries: nothing is lost, and it is
// acknowledged only then.
func TestPushBridgeRetriesAFailingRelayUntilDelivered(t *testing.T) {
	e := startPushEnv(t, time.Second, 0)
	const failures = 4
	rl := newRelay(t, func(n int, _ *http.Request) int {
		if n <= failures {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	e.startBridge(rl, bridge.Options{})
	conv := e.conv(false, 1, 2)
	ids := e.send(1, conv, 1, "retry")
	acc := rl.waitAccepted(t, 1, 60*time.Second)
	reqs, _ := rl.got()
	if len(reqs) != failures+1 {
		t.Fatalf("relay got %d requests, want %d failures and the delivery", len(reqs), failures)
	}
	for i, r := range reqs {
		if r.ev.ID != acc[0].ev.ID || r.header.Get(bridge.HeaderAttempt) != strconv.Itoa(i+1) {
			t.Fatalf("request %d: event %s attempt %s; want every attempt of event %s numbered from 1", i, r.ev.ID, r.header.Get(bridge.HeaderAttempt), acc[0].ev.ID)
		}
	}
	if acc[0].ev.MsgID != ids[0] {
		t.Fatalf("delivered event of msg_id %d, want %d", acc[0].ev.MsgID, ids[0])
	}
	checkFor(t, 10*time.Second, func() error { return bridgeAcked(e, 1) })
	time.Sleep(time.Second)
	if reqs, _ := rl.got(); len(reqs) != failures+1 {
		t.Fatalf("relay got %d requests after the delivery was accepted, want no more", len(reqs))
	}
}

func partitionOf(uid int64) int { return ids.Partition(uid, 4) }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bridgeAcked checks that the bridge's consumer acknowledged n events and
// holds none unacknowledged or waiting.
func bridgeAcked(e *pushEnv, n uint64) error {
	c, err := e.ajs.Consumer(context.Background(), "PUSH", "pushbridge")
	if err != nil {
		return err
	}
	info, err := c.Info(context.Background())
	if err != nil {
		return err
	}
	if info.AckFloor.Stream != n || info.NumAckPending != 0 || info.NumPending != 0 {
		return fmt.Errorf("bridge consumer: ack floor %d, %d unacknowledged, %d waiting; want %d acknowledged and nothing else",
			info.AckFloor.Stream, info.NumAckPending, info.NumPending, n)
	}
	return nil
}

// With --push-body an event carries the newest message's text, cut to
// push.MaxBody bytes; without it (every other test) none.
func TestPushBodyOnlyWithPushBody(t *testing.T) {
	e := startPushEnvWith(t, func(c *config.Config) {
		c.PushAfter, c.PushCollapse, c.PushBody = time.Second, 0, true
	})
	conv := e.conv(false, 1, 2)
	c, err := client.Dial(ctxT(t, 20*time.Second), client.Options{URL: "tcp://" + e.gw.Gateway.TCPAddr(), Token: testenv.Token(t, 1, "phone")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	long := strings.Repeat("ü", push.MaxBody) // 2 KB
	if _, err := c.Send(ctxT(t, 20*time.Second), conv, "b1", long); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 30*time.Second, func() error {
		evs := e.events()
		if len(evs) != 1 {
			return fmt.Errorf("%d push events, want 1", len(evs))
		}
		if !evs[0].BodyTruncated || evs[0].Body != long[:push.MaxBody] {
			return fmt.Errorf("body of %d bytes, truncated %v; want the text's first %d bytes", len(evs[0].Body), evs[0].BodyTruncated, push.MaxBody)
		}
		return nil
	})
}

// A message whose sender was deleted before its push was decided is a
// tombstone: no push event (the body is gone, and so is the sender).
func TestPushSkipsTombstones(t *testing.T) {
	const after = 6 * time.Second
	e := startPushEnv(t, after, 0)
	conv := e.conv(false, 1, 2)
	e.send(1, conv, 1, "gone")
	ac := &admin.Client{NC: e.admin}
	if _, err := ac.DeleteUser(ctxT(t, 10*time.Second), admin.DeleteUserRequest{UID: 1}); err != nil {
		t.Fatal(err)
	}
	checkFor(t, 30*time.Second, func() error {
		if d, err := ac.Deletion(ctxT(t, 10*time.Second), 1); err != nil || d.State != store.DeletionDone {
			return fmt.Errorf("deletion of uid 1: %+v, %v", d, err)
		}
		return nil
	})
	checkFor(t, 30*time.Second, func() error {
		if got := e.outcome(push.OutcomeTombstone); got != 1 {
			return fmt.Errorf("%v tombstones decided, want uid 2's entry of the deleted sender's message", got)
		}
		return nil
	})
	if evs := e.events(); len(evs) != 0 {
		t.Fatalf("push events for a deleted sender's message: %+v", evs)
	}
}

// BenchmarkPushGroupAllOffline measures how long the pusher takes to
// publish the events of one message to a group whose members are all
// offline (one event per member: they are in no collapse window), from
// the message's decision time on (--push-after after its STORED).
// Reported as events per second.
func BenchmarkPushGroupAllOffline(b *testing.B) {
	const members = 1000
	e := startPushEnv(b, time.Second, 0)
	uids := make([]int64, members)
	for i := range uids {
		uids[i] = int64(i + 1)
	}
	conv := createConvVia(b, e.admin, true, uids...)
	b.ResetTimer()
	var total time.Duration
	for i := range b.N {
		e.send(1, conv, 1, "bench"+strconv.Itoa(i))
		start := time.Now()
		want := (i + 1) * (members - 1)
		checkFor(b, 5*time.Minute, func() error {
			if got := int(e.outcome(push.OutcomePushed)); got < want {
				return fmt.Errorf("%d of %d pushed", got, want)
			}
			return nil
		})
		total += time.Since(start) - time.Second // the decision waits --push-after (1s) after the send
	}
	b.ReportMetric(float64(b.N*(members-1))/total.Seconds(), "events/s")
}
