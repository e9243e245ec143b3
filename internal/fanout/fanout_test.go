package fanout

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/natsconn"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

var layout = streams.Layout{InboxPartitions: 4, SendPartitions: 2}

// rig is a fanout on a real NATS server and a real database, fed by
// publishing SEND records the way a gateway does.
type rig struct {
	t       testing.TB
	nats    *testenv.NATS
	nc      *nats.Conn
	js      jetstream.JetStream
	st      *store.Store
	f       *Fanout
	results chan *pb.SendResult
	stop    context.CancelFunc
	done    chan struct{}
}

func newRig(t testing.TB, opts Options, hook func() error) *rig {
	t.Helper()
	r := &rig{t: t, nats: testenv.StartNATS(t), st: testenv.Store(t), results: make(chan *pb.SendResult, 1<<20)}
	var err error
	r.nc, err = natsconn.Connect(r.nats.URL(), "fanout-test", testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.nc.Close)
	r.js, _ = jetstream.New(r.nc)
	ctx := context.Background()
	if err := streams.EnsureStreams(ctx, r.js, layout, streams.DefaultHotWindow, streams.DefaultReplicas); err != nil {
		t.Fatal(err)
	}
	if _, err := r.nc.Subscribe("test.results", func(m *nats.Msg) {
		res := new(pb.SendResult)
		if proto.Unmarshal(m.Data, res) == nil {
			r.results <- res
		}
	}); err != nil {
		t.Fatal(err)
	}
	opts.Layout = layout
	r.f, err = New(opts, testenv.Logger(t), r.nc, r.st, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r.f.afterCommit = hook
	rctx, cancel := context.WithCancel(ctx)
	r.stop, r.done = cancel, make(chan struct{})
	go func() {
		defer close(r.done)
		_ = r.f.Run(rctx)
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// send publishes a SEND record as the gateway does; msgID is the JetStream
// dedupe id (the gateway uses "<uid>:<client_msg_id>").
func (r *rig) send(uid, conv int64, cmid, text, msgID string) {
	r.t.Helper()
	r.sendRecord(&pb.SendRecord{SenderUid: uid, SenderDevice: "d", ClientMsgId: cmid, ConvId: conv, Kind: 1, Text: text}, msgID)
}

// sendRecord publishes rec to SEND as it is, as an older gateway or a hand
// might have written it.
func (r *rig) sendRecord(rec *pb.SendRecord, msgID string) {
	r.t.Helper()
	b, err := proto.Marshal(rec)
	if err != nil {
		r.t.Fatal(err)
	}
	conv := rec.GetConvId()
	m := &nats.Msg{
		Subject: streams.SendSubject(ids.Partition(conv, layout.SendPartitions), conv),
		Data:    b,
		Header:  nats.Header{jetstream.MsgIDHeader: {msgID}, streams.HeaderReply: {"test.results"}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := r.js.PublishMsg(ctx, m); err != nil {
		r.t.Fatal(err)
	}
}

// sendAsync is send without waiting for JetStream's ack.
func (r *rig) sendAsync(uid, conv int64, cmid, text, msgID string) {
	r.t.Helper()
	b, _ := proto.Marshal(&pb.SendRecord{SenderUid: uid, SenderDevice: "d", ClientMsgId: cmid, ConvId: conv, Kind: 1, Text: text})
	m := &nats.Msg{
		Subject: streams.SendSubject(ids.Partition(conv, layout.SendPartitions), conv),
		Data:    b,
		Header:  nats.Header{jetstream.MsgIDHeader: {msgID}, streams.HeaderReply: {"test.results"}},
	}
	if _, err := r.js.PublishMsgAsync(m); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) result(within time.Duration) (*pb.SendResult, bool) {
	select {
	case res := <-r.results:
		return res, true
	case <-time.After(within):
		return nil, false
	}
}

func (r *rig) group(members ...int64) int64 {
	id, _, err := r.st.CreateConversation(context.Background(), store.KindGroup, members, false)
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

func (r *rig) rows(sql string, args ...any) int {
	var n int
	if err := r.st.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	return n
}

// entriesOf counts uid's inbox entries for msgID.
func (r *rig) entriesOf(uid, msgID int64) int {
	n := 0
	for _, e := range testenv.InboxEntries(r.t, r.nc, layout, uid) {
		if e.MsgID == msgID {
			n++
		}
	}
	return n
}

// oneEntryEach asserts that each of uids holds exactly one inbox entry for
// msgID: no member lost the message, none got it twice.
func (r *rig) oneEntryEach(uids []int64, msgID int64) {
	r.t.Helper()
	for _, uid := range uids {
		if n := r.entriesOf(uid, msgID); n != 1 {
			r.t.Errorf("uid %d holds %d entries of the message, want 1", uid, n)
		}
	}
}

func members(from, n int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = from + int64(i)
	}
	return out
}

// A crash between the content commit and the inbox publishes: the batch is
// abandoned right after the commit (the hook fails it, as a crash would),
// then runs again. One content row, one entry per member, and STORED
// carries the msg_id of the first attempt.
func TestCrashAfterCommitCompletesWithoutDuplicates(t *testing.T) {
	var calls atomic.Int32
	r := newRig(t, Options{}, func() error {
		if calls.Add(1) == 1 {
			return errors.New("simulated crash after commit")
		}
		return nil
	})
	ms := members(1, 10)
	conv := r.group(ms...)
	r.send(1, conv, "c-1", "hello", "1:c-1")
	res, ok := r.result(30 * time.Second)
	if !ok || res.Status != pb.SendStatus_STORED {
		t.Fatalf("result %v (ok %v), want STORED", res, ok)
	}
	if calls.Load() < 2 {
		t.Fatalf("the batch ran %d times; the crash path was not exercised", calls.Load())
	}
	var firstID int64
	if err := r.st.Pool.QueryRow(context.Background(), `SELECT msg_id FROM msg_content WHERE client_msg_id = 'c-1'`).Scan(&firstID); err != nil {
		t.Fatal(err)
	}
	if res.MsgId != firstID || r.rows(`SELECT count(*) FROM msg_content`) != 1 {
		t.Fatalf("STORED msg_id %d, stored row %d, rows %d", res.MsgId, firstID, r.rows(`SELECT count(*) FROM msg_content`))
	}
	r.oneEntryEach(ms, firstID)
}

// Idempotency is forever: a retry that JetStream no longer dedupes (its
// window passed; here: a different Nats-Msg-Id) is answered from Postgres
// with the original ids and is not fanned out again.
func TestRetryAfterDedupeWindowIsAnsweredFromPostgres(t *testing.T) {
	r := newRig(t, Options{}, nil)
	ms := members(1, 5)
	conv := r.group(ms...)
	r.send(2, conv, "late-1", "first", "2:late-1")
	first, ok := r.result(30 * time.Second)
	if !ok || first.Status != pb.SendStatus_STORED {
		t.Fatalf("first: %v", first)
	}
	// The fanned_out mark lands before the answer.
	if got := r.rows(`SELECT count(*) FROM msg_content WHERE fanned_out`); got != 1 {
		t.Fatalf("%d rows marked fanned out after STORED, want 1", got)
	}
	r.send(2, conv, "late-1", "first, again", "2:late-1:after-window")
	again, ok := r.result(30 * time.Second)
	if !ok || again.Status != pb.SendStatus_STORED || again.MsgId != first.MsgId || again.ConvSeq != first.ConvSeq {
		t.Fatalf("retry: %v, first %v", again, first)
	}
	r.oneEntryEach(ms, first.MsgId)
}

// NATS stops between the content commit and the inbox publishes: no STORED
// while it is down; after it is back the send completes by itself, once.
func TestNATSDownMidFanoutNoStoredUntilRecovery(t *testing.T) {
	reached := make(chan struct{})
	release := make(chan struct{})
	var once atomic.Bool
	r := newRig(t, Options{PublishTimeout: 2 * time.Second}, func() error {
		if once.CompareAndSwap(false, true) {
			close(reached)
			<-release
		}
		return nil
	})
	ms := members(1, 20)
	conv := r.group(ms...)
	r.send(3, conv, "down-1", "through the outage", "3:down-1")
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("fanout never reached the commit")
	}
	r.nats.Stop()
	close(release)
	if res, ok := r.result(4 * time.Second); ok {
		t.Fatalf("answer while NATS was down: %v", res)
	}
	if got := r.rows(`SELECT count(*) FROM msg_content WHERE NOT fanned_out`); got != 1 {
		t.Fatalf("%d committed rows awaiting fanout, want 1", got)
	}
	r.nats.Start()
	res, ok := r.result(60 * time.Second)
	if !ok || res.Status != pb.SendStatus_STORED {
		t.Fatalf("after recovery: %v (ok %v)", res, ok)
	}
	r.oneEntryEach(ms, res.MsgId)
}

// Postgres refuses the batch (its connections are killed mid-flight): no
// STORED, nothing half-written; the batch completes once Postgres answers.
func TestPostgresFailureMidBatchRetries(t *testing.T) {
	var calls atomic.Int32
	r := newRig(t, Options{}, nil)
	ms := members(1, 3)
	conv := r.group(ms...)
	// Hold a lock on the conversation row so the batch blocks inside its
	// transaction, then kill the fanout's backend.
	ctx := context.Background()
	tx, err := r.st.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT 1 FROM conversation WHERE conv_id = $1 FOR UPDATE`, conv); err != nil {
		t.Fatal(err)
	}
	r.send(1, conv, "pg-1", "x", "1:pg-1")
	deadline := time.Now().Add(20 * time.Second)
	killed := 0
	for killed == 0 && time.Now().Before(deadline) {
		killed = r.rows(`SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()) k`)
		time.Sleep(20 * time.Millisecond)
	}
	calls.Store(int32(killed))
	if killed == 0 {
		t.Fatal("the fanout never blocked on the locked conversation")
	}
	if res, ok := r.result(500 * time.Millisecond); ok {
		t.Fatalf("answer while the batch was failing: %v", res)
	}
	_ = tx.Rollback(ctx)
	res, ok := r.result(30 * time.Second)
	if !ok || res.Status != pb.SendStatus_STORED || res.ConvSeq != 1 {
		t.Fatalf("after recovery: %v (ok %v)", res, ok)
	}
	if got := r.rows(`SELECT count(*) FROM msg_content`); got != 1 {
		t.Fatalf("%d rows", got)
	}
}

// A membership change reaches the fanout before the conversation's next
// message: a removed member gets nothing new, an added one gets it.
func TestMembershipChangeInvalidatesTheCache(t *testing.T) {
	r := newRig(t, Options{}, nil)
	conv := r.group(1, 2, 3)
	r.send(1, conv, "m-1", "before", "1:m-1")
	first, _ := r.result(30 * time.Second)
	ctx := context.Background()
	if _, err := r.st.RemoveMembers(ctx, conv, []int64{3}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.AddMembers(ctx, conv, []int64{4}); err != nil {
		t.Fatal(err)
	}
	r.send(1, conv, "m-2", "after", "1:m-2")
	second, ok := r.result(30 * time.Second)
	if !ok || second.Status != pb.SendStatus_STORED {
		t.Fatalf("second: %v", second)
	}
	if r.entriesOf(3, first.MsgId) != 1 || r.entriesOf(3, second.MsgId) != 0 {
		t.Fatal("removed member: wants the first message only")
	}
	if r.entriesOf(4, first.MsgId) != 0 || r.entriesOf(4, second.MsgId) != 1 {
		t.Fatal("added member: wants the second message only")
	}
	// A removed member can no longer send.
	r.send(3, conv, "m-3", "still here?", "3:m-3")
	res, _ := r.result(30 * time.Second)
	if res.GetCode() != pb.ErrorCode_NOT_MEMBER {
		t.Fatalf("removed member's send: %v", res)
	}
}

// Malformed SEND records are answered (when they can be) and never stored.
func TestInvalidRecordsAreRejected(t *testing.T) {
	r := newRig(t, Options{}, nil)
	conv := r.group(1, 2)
	r.send(1, conv, "", "no id", "1:")
	r.send(0, conv, "z-1", "no sender", "0:z-1")
	for i := 0; i < 2; i++ {
		res, ok := r.result(30 * time.Second)
		if !ok || res.Status != pb.SendStatus_REJECTED || res.Code != pb.ErrorCode_INVALID_ARGUMENT {
			t.Fatalf("result %d: %v", i, res)
		}
	}
	// Garbage bytes: dropped with a log line and counted, never stored.
	m := &nats.Msg{Subject: streams.SendSubject(ids.Partition(conv, layout.SendPartitions), conv), Data: []byte("\xff\xff\xff")}
	if _, err := r.js.PublishMsg(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	r.send(1, conv, "ok-1", "fine", "1:ok-1")
	res, _ := r.result(30 * time.Second)
	if res.GetStatus() != pb.SendStatus_STORED || res.ConvSeq != 1 {
		t.Fatalf("a valid send after garbage: %v", res)
	}
	if got := r.rows(`SELECT count(*) FROM msg_content`); got != 1 {
		t.Fatalf("%d rows", got)
	}
}

// Sends of one conversation are stored in the order the log holds them.
func TestConvSeqFollowsSendLogOrder(t *testing.T) {
	r := newRig(t, Options{BatchSize: 7}, nil)
	conv := r.group(1, 2)
	const n = 100
	for i := 0; i < n; i++ {
		cmid := "o-" + strconv.Itoa(i)
		r.send(1, conv, cmid, fmt.Sprint(i), "1:"+cmid)
	}
	for i := 0; i < n; i++ {
		res, ok := r.result(30 * time.Second)
		if !ok {
			t.Fatalf("only %d results", i)
		}
		if res.ClientMsgId != "o-"+strconv.Itoa(i) || res.ConvSeq != int64(i+1) {
			t.Fatalf("result %d: %v", i, res)
		}
	}
}

// Two fanouts serve a SEND partition for a moment while its pin moves: the
// one losing it may hold a send it committed (conv_seq N) and cannot
// publish (NATS fails it), while the other takes the next send of the
// conversation (N+1). Simulated here by a row committed and never
// published, as the stuck fanout leaves it: the next send's batch publishes
// it first, so every member's inbox holds N before N+1 (without that, N's
// entries came after N+1's once the stuck fanout got through, and a device
// got N late and out of order; the cluster chaos run saw it).
func TestAnEarlierSendStuckWithAnotherFanoutIsPublishedFirst(t *testing.T) {
	r := newRig(t, Options{}, nil)
	ms := members(1, 3)
	conv := r.group(ms...)
	r.send(1, conv, "w", "first", "1:w")
	w, ok := r.result(30 * time.Second)
	if !ok || w.Status != pb.SendStatus_STORED || w.ConvSeq != 1 {
		t.Fatalf("first send: %v", w)
	}
	// The other fanout's commit: the row and the conversation's last_seq.
	stuck := w.MsgId + 1000 // not an id this fanout hands out next
	ctx := context.Background()
	if _, err := r.st.Pool.Exec(ctx, `INSERT INTO msg_content (msg_id, conv_id, conv_seq, sender_uid, sender_device, client_msg_id, kind, body, created_at)
		VALUES ($1, $2, 2, 2, 'd', 'x', 1, 'stuck', now())`, stuck, conv); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.Pool.Exec(ctx, `UPDATE conversation SET last_seq = 2 WHERE conv_id = $1`, conv); err != nil {
		t.Fatal(err)
	}
	r.send(3, conv, "y", "after", "3:y")
	y, ok := r.result(30 * time.Second)
	if !ok || y.Status != pb.SendStatus_STORED || y.ConvSeq != 3 {
		t.Fatalf("the send after the stuck one: %v", y)
	}
	for _, uid := range ms {
		var got []int64
		for _, e := range testenv.InboxEntries(t, r.nc, layout, uid) {
			got = append(got, e.MsgID)
		}
		if want := []int64{w.MsgId, stuck, y.MsgId}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("uid %d's inbox holds %v, want %v (the stuck conv_seq 2 before 3)", uid, got, want)
		}
	}
	if n := r.rows(`SELECT count(*) FROM msg_content WHERE msg_id = $1 AND fanned_out`, stuck); n != 1 {
		t.Errorf("the stuck message is not marked fanned out")
	}
	if got := testutil.ToFloat64(r.f.metrics.earlierPublished); got != 1 {
		t.Errorf("inboxd_fanout_earlier_published_total %v, want 1", got)
	}
}

// A batch with more inbox entries than the process's async publish window
// (sends to a group of 100) is published within the window, acknowledged
// as it goes: every send is STORED once, no batch fails and is retried,
// and a member's inbox holds every message once, in conv_seq order.
func TestBatchLargerThanThePublishWindow(t *testing.T) {
	// The first batch is held after its commit until every send is in the
	// stream, so the next batch is a full one.
	sent := make(chan struct{})
	var once sync.Once
	r := newRig(t, Options{BatchSize: 256}, func() error {
		once.Do(func() { <-sent })
		return nil
	})
	conv := r.group(members(1, 100)...)
	const n = 300 // a batch of 256 sends: 25,600 entries, more than publishWindow
	for i := 0; i < n; i++ {
		cmid := "w-" + strconv.Itoa(i)
		r.sendAsync(1, conv, cmid, fmt.Sprint(i), "1:"+cmid)
	}
	select {
	case <-r.js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("sends not acknowledged by JetStream")
	}
	close(sent)
	for i := 0; i < n; i++ {
		res, ok := r.result(60 * time.Second)
		if !ok {
			t.Fatalf("only %d of %d results", i, n)
		}
		if res.Status != pb.SendStatus_STORED {
			t.Fatalf("result %d: %v", i, res)
		}
	}
	var m dto.Metric
	if err := r.f.metrics.batchErrors.Write(&m); err != nil || m.GetCounter().GetValue() != 0 {
		t.Fatalf("%v batches failed and were retried (%v)", m.GetCounter().GetValue(), err)
	}
	entries := testenv.InboxEntries(t, r.nc, layout, 77)
	if len(entries) != n {
		t.Fatalf("member 77 has %d inbox entries, want %d", len(entries), n)
	}
	for i, e := range entries {
		if e.ConvSeq != int64(i+1) {
			t.Fatalf("entry %d has conv_seq %d", i, e.ConvSeq)
		}
	}
}

// The fanout does not trust the SEND stream: a record the gateway would
// never have published (it refuses the send with wire.CheckSend) is refused
// by the fanout too, with the same code and the same words, and is not
// stored.
func TestSendTheGatewayRefusesIsRefusedByTheFanout(t *testing.T) {
	r := newRig(t, Options{}, nil)
	conv := r.group(1, 2)
	for i, s := range []*pb.Send{
		{ConvId: 0, ClientMsgId: "r-conv", Kind: 1, Text: "x"},
		{ConvId: conv, ClientMsgId: "", Kind: 1, Text: "x"},
		{ConvId: conv, ClientMsgId: strings.Repeat("x", wire.MaxClientMsgIDLen+1), Kind: 1, Text: "x"},
		{ConvId: conv, ClientMsgId: "r-\x01-control", Kind: 1, Text: "x"},
		{ConvId: conv, ClientMsgId: "r-long", Kind: 1, Text: strings.Repeat("x", wire.MaxTextLen+1)},
		{ConvId: conv, ClientMsgId: "r-kind", Kind: 2, Text: "x"},
	} {
		var want *wire.Error
		if !errors.As(wire.CheckSend(s), &want) {
			t.Fatalf("case %d: the gateway accepts %v", i, s)
		}
		r.sendRecord(&pb.SendRecord{SenderUid: 1, SenderDevice: "d", ClientMsgId: s.ClientMsgId, ConvId: s.ConvId,
			Kind: s.Kind, Text: s.Text}, "refused-"+strconv.Itoa(i))
		res, ok := r.result(30 * time.Second)
		if !ok || res.Status != pb.SendStatus_REJECTED || res.Code != want.Code || res.Message != want.Message {
			t.Fatalf("case %d: the fanout answered %v (ok %v); the gateway refuses with %v", i, res, ok, want)
		}
	}
	if got := r.rows(`SELECT count(*) FROM msg_content`); got != 0 {
		t.Fatalf("%d refused sends stored", got)
	}
}

// shortenInboxDedupe sets the INBOX partitions' duplicate window to d, so a
// test can outlive it.
func (r *rig) shortenInboxDedupe(d time.Duration) {
	r.t.Helper()
	ctx := context.Background()
	for p := 0; p < layout.InboxPartitions; p++ {
		s, err := r.js.Stream(ctx, streams.InboxStream(p))
		if err != nil {
			r.t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		cfg.Duplicates = d
		if _, err := r.js.UpdateStream(ctx, cfg); err != nil {
			r.t.Fatal(err)
		}
	}
}

// failFirst makes the first statement that updates column of msg_content
// fail, the way a Postgres restart or a lost connection fails it (a
// sequence counts the attempts: it is not rolled back with them).
func (r *rig) failFirst(column string) {
	r.t.Helper()
	_, err := r.st.Pool.Exec(context.Background(), `
		CREATE SEQUENCE test_fail_first;
		CREATE FUNCTION test_fail_first() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF nextval('test_fail_first') = 1 THEN
				RAISE EXCEPTION 'injected failure of the first update of msg_content.`+column+`';
			END IF;
			RETURN NULL;
		END $$;
		CREATE TRIGGER test_fail_first BEFORE UPDATE OF `+column+` ON msg_content
			FOR EACH STATEMENT EXECUTE FUNCTION test_fail_first();`)
	if err != nil {
		r.t.Fatal(err)
	}
}

// The fanned_out mark fails once (after every inbox entry was
// acknowledged). It is what a retried send is recognised by: the gateway
// answers a retry that JetStream deduped only once Postgres says fanned
// out, and the fanout republishes a stored row that is not. So STORED
// comes only after the mark landed, and a retry after every dedupe window
// adds no entry.
func TestFailedFannedOutMarkIsRetriedNoDuplicates(t *testing.T) {
	r := newRig(t, Options{}, nil)
	r.shortenInboxDedupe(time.Second)
	r.failFirst("fanned_out")
	ms := members(1, 5)
	conv := r.group(ms...)
	r.send(1, conv, "mark-1", "hello", "1:mark-1")
	first, ok := r.result(30 * time.Second)
	if !ok || first.Status != pb.SendStatus_STORED {
		t.Fatalf("result %v (ok %v), want STORED", first, ok)
	}
	if n := r.rows(`SELECT last_value FROM test_fail_first`); n < 1 {
		t.Fatal("the mark was never attempted: the failure was not injected")
	}
	var retries dto.Metric
	if err := r.f.metrics.markRetries.Write(&retries); err != nil || retries.GetCounter().GetValue() < 1 {
		t.Errorf("%v mark retries counted (%v), want at least 1", retries.GetCounter().GetValue(), err)
	}
	// What the gateway asks when JetStream reports a retry as a duplicate.
	key := store.SendKey{Sender: 1, ClientMsgID: "mark-1"}
	lk, err := r.st.LookupSends(context.Background(), []store.SendKey{key})
	if err != nil {
		t.Fatal(err)
	}
	if m := lk.Stored[key]; m == nil || !m.FannedOut {
		t.Errorf("after STORED, Postgres says %+v: a retry deduped by JetStream would wait for fanned_out and time out", m)
	}
	// A retry after both dedupe windows (SEND: another Nats-Msg-Id; INBOX:
	// the shortened window has passed).
	time.Sleep(1500 * time.Millisecond)
	r.send(1, conv, "mark-1", "hello", "1:mark-1:after-window")
	again, ok := r.result(30 * time.Second)
	if !ok || again.Status != pb.SendStatus_STORED || again.MsgId != first.MsgId {
		t.Fatalf("retry: %v (ok %v), first %v", again, ok, first)
	}
	r.oneEntryEach(ms, first.MsgId)
}

// A crash after the content commit, and the membership changes before the
// send is run again: the republish goes to the members at the message's
// conv_seq, not to today's. Member 2 left after the message (it keeps it),
// member 3 left and came back (it was a member then), member 4 joined
// after it (it must not get it).
func TestRepublishAfterCrashGoesToTheMembersAtSendTime(t *testing.T) {
	reached := make(chan struct{})
	release := make(chan struct{})
	var calls atomic.Int32
	r := newRig(t, Options{}, func() error {
		if calls.Add(1) == 1 {
			close(reached)
			<-release
			return errors.New("simulated crash after commit")
		}
		return nil
	})
	conv := r.group(1, 2, 3)
	r.send(1, conv, "at-1", "to the members of seq 1", "1:at-1")
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("fanout never reached the commit")
	}
	ctx := context.Background()
	for _, change := range []func() (int64, error){
		func() (int64, error) { return r.st.RemoveMembers(ctx, conv, []int64{2, 3}) },
		func() (int64, error) { return r.st.AddMembers(ctx, conv, []int64{3, 4}) },
	} {
		if _, err := change(); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	res, ok := r.result(30 * time.Second)
	if !ok || res.Status != pb.SendStatus_STORED || res.ConvSeq != 1 {
		t.Fatalf("result %v (ok %v), want STORED at conv_seq 1", res, ok)
	}
	if calls.Load() < 2 {
		t.Fatalf("the batch ran %d times; the republish path was not exercised", calls.Load())
	}
	for uid, want := range map[int64]int{1: 1, 2: 1, 3: 1, 4: 0} {
		if n := r.entriesOf(uid, res.MsgId); n != want {
			t.Errorf("uid %d holds %d entries of the message, want %d", uid, n, want)
		}
	}
}

// A batch names more conversations than the member cache holds: every
// sender is still checked against its own conversation's members (an
// eviction halfway through the batch had dropped lists it relied on, and
// their senders were refused as non-members for good).
func TestBatchWiderThanTheMemberCache(t *testing.T) {
	sent := make(chan struct{})
	var once sync.Once
	r := newRig(t, Options{MemberCacheSize: 2}, func() error {
		once.Do(func() { <-sent })
		return nil
	})
	var convs []int64
	for i := int64(0); i < 8; i++ {
		convs = append(convs, r.group(1, 100+i))
	}
	for i, conv := range convs {
		cmid := "wide-" + strconv.Itoa(i)
		r.sendAsync(1, conv, cmid, "x", "1:"+cmid)
	}
	select {
	case <-r.js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("sends not acknowledged by JetStream")
	}
	close(sent)
	for range convs {
		res, ok := r.result(30 * time.Second)
		if !ok || res.Status != pb.SendStatus_STORED {
			t.Fatalf("result %v (ok %v), want STORED", res, ok)
		}
	}
}

// A fanout consumer keeps its state in memory: a NATS server restarted
// alone (or an operator) loses it while the fanout runs. The fanout
// creates it again, and the sends made meanwhile are STORED, each once.
func TestLostConsumerIsCreatedAgain(t *testing.T) {
	r := newRig(t, Options{}, nil)
	ms := members(1, 4)
	conv := r.group(ms...)
	r.send(2, conv, "before", "before the loss", "2:before")
	if res, ok := r.result(30 * time.Second); !ok || res.Status != pb.SendStatus_STORED {
		t.Fatalf("before the loss: %v", res)
	}
	name := streams.FanoutConsumer(ids.Partition(conv, layout.SendPartitions))
	info, err := r.js.Consumer(context.Background(), streams.SendStream, name)
	if err != nil {
		t.Fatal(err)
	}
	if !info.CachedInfo().Config.MemoryStorage {
		t.Fatalf("%s keeps its state in a file; want memory (jetstream/consumers/SEND_fanout.json)", name)
	}
	if err := r.js.DeleteConsumer(context.Background(), streams.SendStream, name); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 5 {
		cmid := fmt.Sprintf("after-%d", i)
		r.send(2, conv, cmid, "after the loss", "2:"+cmid)
		want = append(want, cmid)
	}
	got := map[string]*pb.SendResult{}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		// "before" may be answered again: its ack can reach the consumer
		// after the delete, so the work queue keeps it and the new
		// consumer delivers it (a repeat, answered with its first result).
		if res, ok := r.result(time.Until(deadline)); ok && res.ClientMsgId != "before" {
			got[res.ClientMsgId] = res
		}
	}
	for _, cmid := range want {
		res := got[cmid]
		if res == nil || res.Status != pb.SendStatus_STORED {
			t.Fatalf("send %s after the consumer was lost: %v (answers %d of %d)", cmid, res, len(got), len(want))
		}
		r.oneEntryEach(ms, res.MsgId)
	}
	if n := testutil.ToFloat64(r.f.metrics.consumersRecreated); n < 1 {
		t.Errorf("inboxd_fanout_consumers_recreated_total = %v, want ≥ 1", n)
	}
}

// A NATS server restarted alone (split roles, one node) comes back without
// the fanout consumers, whose state is in memory: sends made after the
// restart are STORED all the same.
func TestSendsAfterANATSRestartAreStored(t *testing.T) {
	r := newRig(t, Options{}, nil)
	ms := members(1, 3)
	conv := r.group(ms...)
	r.send(2, conv, "before", "before the restart", "2:before")
	if res, ok := r.result(30 * time.Second); !ok || res.Status != pb.SendStatus_STORED {
		t.Fatalf("before the restart: %v", res)
	}
	r.nats.Stop()
	r.nats.Start()
	// The send is published once JetStream answers again (the rig's
	// client reconnects); it waits in SEND until a consumer exists.
	r.send(2, conv, "after", "after the restart", "2:after")
	res, ok := r.result(30 * time.Second)
	if !ok || res.Status != pb.SendStatus_STORED {
		t.Fatalf("after the restart: %v (ok %v)", res, ok)
	}
	r.oneEntryEach(ms, res.MsgId)
	// The restart took the consumers with it: the one that served the
	// send is the fanout's creation.
	if n := testutil.ToFloat64(r.f.metrics.consumersRecreated); n < 1 {
		t.Errorf("inboxd_fanout_consumers_recreated_total = %v after a restart, want ≥ 1", n)
	}
}
