package e2e

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire/pb"
)

// shortHotWindow is the hot window of these tests' nodes: entries older
// than this are trimmed from the streams once archived (trimmer rounds of
// 1 s).
const shortHotWindow = 2 * time.Second

func hotWindowNode(t *testing.T, adjust func(*config.Config)) *node.Node {
	t.Helper()
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.HotWindow = shortHotWindow
	if adjust != nil {
		adjust(&cfg)
	}
	return testnode.StartNode(t, cfg, config.RoleAllInOne)
}

// inboxState returns the first sequence and the entry count of uid's INBOX
// partition.
func inboxState(t *testing.T, n *node.Node, uid int64) (first, msgs uint64) {
	t.Helper()
	js, err := jetstream.New(n.NC)
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctxT(t, 5*time.Second), streams.InboxStream(ids.Partition(uid, testnode.Layout().InboxPartitions)))
	if err != nil {
		t.Fatal(err)
	}
	st := s.CachedInfo().State
	return st.FirstSeq, st.Msgs
}

// firstLogin logs uid's device in once and out again: its consumer and
// its mirrored cursor (0) exist.
func firstLogin(t *testing.T, n *node.Node, uid int64, device, kind string) {
	t.Helper()
	c := dialRaw(t, n.Gateway.TCPAddr())
	c.rawHello(uid, device, kind)
	waitCond(t, 10*time.Second, "the device's cursor mirrored", func() (bool, string) {
		k := count(t, n, `SELECT count(*) FROM device_cursor WHERE uid = $1`, uid)
		return k == 1, fmt.Sprintf("%d rows", k)
	})
	c.nc.Close()
}

// waitTrimmed waits until uid's INBOX partition holds no entry (archived
// and older than the hot window) and returns its first sequence.
func waitTrimmed(t *testing.T, n *node.Node, uid int64) uint64 {
	t.Helper()
	waitCond(t, 30*time.Second, "the entries trimmed", func() (bool, string) {
		first, msgs := inboxState(t, n, uid)
		return msgs == 0, fmt.Sprintf("first seq %d, %d entries", first, msgs)
	})
	first, _ := inboxState(t, n, uid)
	return first
}

// readConfirming appends the messages of the batches that arrive to got,
// confirming each batch, until done says so after a batch; it fails when
// the connection closes first (want: the messages expected in all).
func (c *rawTCP) readConfirming(got []*pb.Message, want int, done func(*pb.Batch, []*pb.Message) bool) []*pb.Message {
	c.t.Helper()
	for {
		b := c.nextBatch()
		if b == nil {
			c.t.Fatalf("connection closed after %d of %d messages", len(got), want)
		}
		got = append(got, b.GetMessages()...)
		if b.GetBatchId() != 0 {
			c.write(&pb.Ack{BatchIds: []uint64{b.GetBatchId()}})
		}
		if done(b, got) {
			return got
		}
	}
}

// waitCond polls cond every 50 ms until it holds; after within it fails
// with what cond last said.
func waitCond(t *testing.T, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %s", what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A device offline for longer than the hot window gets every message, in
// order, each once: the entries trimmed from the stream while it was away
// from the Postgres archive, then the newest ones (not archived yet) from
// the stream, with nothing skipped. The trim moved the device's consumer
// (a purge moves every consumer past what it removes); its cursor is the
// one the device confirmed all the same; so is a consumer that was reaped
// meanwhile and is created again at a start below the stream's first entry.
func TestDeviceOfflineLongerThanTheHotWindowGetsEverything(t *testing.T) {
	t.Run("consumer kept", func(t *testing.T) {
		n := testOfflineLongerThanTheHotWindow(t, nil)
		if r := metric(t, n, "inboxd_gateway_consumers_recreated_total"); r != 0 {
			t.Fatalf("%v consumers recreated: the device's was to be kept", r)
		}
	})
	t.Run("consumer reaped", func(t *testing.T) {
		n := testOfflineLongerThanTheHotWindow(t, func(c *config.Config) { c.DeviceReap = time.Second })
		if r := metric(t, n, "inboxd_gateway_consumers_recreated_total"); r == 0 {
			t.Fatal("the device's consumer was not reaped and recreated")
		}
	})
}

func testOfflineLongerThanTheHotWindow(t *testing.T, adjust func(*config.Config)) *node.Node {
	n := hotWindowNode(t, adjust)
	conv := createConv(t, n, false, 1, 2)

	firstLogin(t, n, 2, "phone", "desktop")

	const old = 300
	want := sendN(t, n, 1, conv, old, "old")
	// Archived and older than the window: trimmed, every one of them.
	trimmedBelow := waitTrimmed(t, n, 2)

	// The newest entries wait for the archiver (it cannot write): the
	// device reads them from the stream.
	defer holdArchiver(t, n)()
	want = append(want, sendN(t, n, 1, conv, 5, "new")...)

	archivePages := metric(t, n, `inboxd_gateway_backfill_pages_total{source="archive"}`)
	tailPages := metric(t, n, `inboxd_gateway_backfill_pages_total{source="tail"}`)
	c := dialRaw(t, n.Gateway.TCPAddr())
	c.rawHello(2, "phone", "desktop")
	got := c.readConfirming(nil, len(want), func(b *pb.Batch, _ []*pb.Message) bool {
		return b.GetLane() == pb.Lane_BACKFILL && !b.GetHasMore()
	})
	if len(got) != len(want) {
		t.Fatalf("the device got %d messages, want %d (%d sent before the trim, 5 after)", len(got), len(want), old)
	}
	for i, m := range got {
		if m.GetMsgId() != want[i] {
			t.Fatalf("message %d is msg %d (seq %d), want %d: every message in order, once", i, m.GetMsgId(), m.GetSeq(), want[i])
		}
		if i > 0 && m.GetSeq() <= got[i-1].GetSeq() {
			t.Fatalf("message %d: seq %d after %d", i, m.GetSeq(), got[i-1].GetSeq())
		}
		if (i < old) != (m.GetSeq() < trimmedBelow) {
			t.Fatalf("message %d has seq %d; the stream was trimmed below %d", i, m.GetSeq(), trimmedBelow)
		}
		// With its body, whichever source served it (the archive's
		// entries carry none: the gateway adds them from its cache).
		text := fmt.Sprintf("old message %d", i)
		if i >= old {
			text = fmt.Sprintf("new message %d", i-old)
		}
		if m.GetText() != text || m.GetSenderUid() != 1 || m.GetCreatedAtMs() == 0 || m.GetExpired() {
			t.Fatalf("message %d (seq %d): text %q, sender %d, created %d, expired %v; want %q from 1",
				i, m.GetSeq(), m.GetText(), m.GetSenderUid(), m.GetCreatedAtMs(), m.GetExpired(), text)
		}
	}
	if d := metric(t, n, `inboxd_gateway_backfill_pages_total{source="archive"}`) - archivePages; d == 0 {
		t.Fatal("no backfill page came from the archive")
	}
	if d := metric(t, n, `inboxd_gateway_backfill_pages_total{source="tail"}`) - tailPages; d == 0 {
		t.Fatal("no backfill page came from the stream")
	}
	return n
}

// holdArchiver stops the archiver's writes until the returned release: a
// transaction holds archive_progress locked, so new inbox entries stay in
// the stream only (neither archived nor trimmed).
func holdArchiver(t *testing.T, n *node.Node) (release func()) {
	t.Helper()
	tx, err := n.Store.Pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `LOCK TABLE archive_progress IN EXCLUSIVE MODE`); err != nil {
		_ = tx.Rollback(context.Background())
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(context.Background()) }
}

// A catch-up from the archive does not move the device's consumer while
// it runs: every reset makes the NATS server count the consumer's pending
// entries in its read loop, reading the stream block message by message
// when the cursor is inside the user's entries (docs/design.md, "Catch-up
// cost follows the device's backlog"). The device's confirmations are kept
// all the same: the Postgres mirror follows them, and a device that leaves
// in the middle resumes after what it confirmed, nothing repeated, nothing
// skipped.
func TestArchiveCatchUpDoesNotMoveTheConsumerMidway(t *testing.T) {
	n := hotWindowNode(t, nil)
	conv := createConv(t, n, false, 1, 2)
	firstLogin(t, n, 2, "phone", "mobile")
	want := sendN(t, n, 1, conv, 450, "drain") // a mobile page is 100: five pages
	waitTrimmed(t, n, 2)

	const resets = `inboxd_gateway_consumer_requests_total{op="reset_to"}`
	const archivePages = `inboxd_gateway_backfill_pages_total{source="archive"}`
	pagesBefore := metric(t, n, archivePages)
	c := dialRaw(t, n.Gateway.TCPAddr())
	c.rawHello(2, "phone", "mobile")
	var got []*pb.Message
	var before float64
	for i := range 3 { // three pages, two confirmed (a mobile device has one page out at a time)
		b := c.nextBatch()
		if b == nil || b.GetLane() != pb.Lane_BACKFILL || !b.GetHasMore() {
			t.Fatalf("want a backfill page with more to come, got %v", b)
		}
		if i == 0 {
			// Counted from the first page on: a gateway that had not seen
			// the trim yet may have tried the tail (and moved the
			// consumer) before it turned to the archive.
			before = metric(t, n, resets)
		}
		if i == 2 {
			break
		}
		got = append(got, b.GetMessages()...)
		c.write(&pb.Ack{BatchIds: []uint64{b.GetBatchId()}})
		time.Sleep(1100 * time.Millisecond) // the consumer was moved once a second before
	}
	if d := metric(t, n, archivePages) - pagesBefore; d < 3 {
		t.Fatalf("%v pages came from the archive, want the three handed over", d)
	}
	if d := metric(t, n, resets) - before; d != 0 {
		t.Fatalf("the consumer was moved %v times during the archive catch-up, want none before its end", d)
	}
	confirmed := got[len(got)-1].GetSeq()
	waitCond(t, 10*time.Second, "the confirmed cursor mirrored", func() (bool, string) {
		k := count(t, n, `SELECT count(*) FROM device_cursor WHERE uid = 2 AND ack_seq = $1`, int64(confirmed))
		return k == 1, fmt.Sprintf("no row at %d", confirmed)
	})

	// The device leaves in the middle and comes back: it gets the rest.
	c.nc.Close()
	c = dialRaw(t, n.Gateway.TCPAddr())
	if w := c.rawHello(2, "phone", "mobile"); w.GetCursor() != confirmed {
		t.Fatalf("welcome cursor %d, want %d: what the device confirmed", w.GetCursor(), confirmed)
	}
	got = c.readConfirming(got, len(want), func(_ *pb.Batch, got []*pb.Message) bool { return len(got) >= len(want) })
	if len(got) != len(want) {
		t.Fatalf("the device got %d messages, want %d", len(got), len(want))
	}
	for i, m := range got {
		if m.GetMsgId() != want[i] {
			t.Fatalf("message %d is msg %d (seq %d), want %d: every message in order, once", i, m.GetMsgId(), m.GetSeq(), want[i])
		}
	}
}

// The summary's pending counts what the device has not confirmed, also in
// the middle of an archive catch-up, where the consumer (whose count it
// starts from) stays where the catch-up began: what the device confirmed
// beyond it is taken off. So does the welcome's after a catch-up that ended
// without moving the consumer.
func TestSummaryPendingDuringAnArchiveCatchUp(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.TailScan = 10 // the stream still holds the entries: the archive serves them because the tail is long
	n := testnode.StartNode(t, cfg, config.RoleAllInOne)
	conv := createConv(t, n, false, 1, 2)
	c := dialRaw(t, n.Gateway.TCPAddr())
	c.rawHello(2, "phone", "mobile")
	c.nc.Close()
	const total = 450
	sendN(t, n, 1, conv, total, "pending")
	waitArchived(t, n, 2*total)
	time.Sleep(time.Second) // the gateway reads the archive's mark every 250 ms (partInfos)

	archivePages := metric(t, n, `inboxd_gateway_backfill_pages_total{source="archive"}`)
	c = dialRaw(t, n.Gateway.TCPAddr())
	if w := c.rawHello(2, "phone", "mobile"); w.GetSummary().GetPending() != total {
		t.Fatalf("welcome pending %d, want %d", w.GetSummary().GetPending(), total)
	}
	got, firstSeq, confirmed := 0, uint64(0), uint64(0)
	for range 2 {
		b := c.nextBatch()
		if b == nil || b.GetLane() != pb.Lane_BACKFILL || !b.GetHasMore() {
			t.Fatalf("want a backfill page with more to come, got %v", b)
		}
		if got == 0 {
			firstSeq = b.GetMessages()[0].GetSeq()
		}
		got += len(b.GetMessages())
		confirmed = b.GetMessages()[len(b.GetMessages())-1].GetSeq()
		c.write(&pb.Ack{BatchIds: []uint64{b.GetBatchId()}})
	}
	if d := metric(t, n, `inboxd_gateway_backfill_pages_total{source="archive"}`) - archivePages; d < 2 {
		t.Fatalf("%v pages came from the archive, want the two confirmed", d)
	}
	want := uint64(total - got)
	var last uint64
	waitCond(t, 10*time.Second, "the summary's pending", func() (bool, string) {
		c.write(&pb.SummaryRequest{RequestId: 7})
		for {
			switch m := c.read().(type) {
			case nil:
				t.Fatal("connection closed")
			case *pb.Summary:
				last = m.GetPending()
				return last == want, fmt.Sprintf("pending %d after %d of %d confirmed, want %d", last, got, total, want)
			}
		}
	})

	// A gateway that dies in the middle leaves the consumer where the
	// catch-up began (here put back there by the admin user) and the mirror
	// at what was confirmed: the next login resumes at the mirror and
	// counts the pending entries from there.
	waitCond(t, 10*time.Second, "the confirmed cursor mirrored", func() (bool, string) {
		k := count(t, n, `SELECT count(*) FROM device_cursor WHERE uid = 2 AND ack_seq = $1`, int64(confirmed))
		return k == 1, fmt.Sprintf("no row at %d", confirmed)
	})
	c.nc.Close()
	js, err := jetstream.New(testnode.Admin(t, n))
	if err != nil {
		t.Fatal(err)
	}
	stream := streams.InboxStream(ids.Partition(2, testnode.Layout().InboxPartitions))
	waitCond(t, 10*time.Second, "the consumer put back where the catch-up began", func() (bool, string) {
		_, err := js.ResetConsumerToSequence(ctxT(t, 5*time.Second), stream, streams.DeviceConsumer(2, "phone"), firstSeq)
		return err == nil, fmt.Sprint(err)
	})
	c = dialRaw(t, n.Gateway.TCPAddr())
	w := c.rawHello(2, "phone", "mobile")
	if w.GetCursor() != confirmed || w.GetSummary().GetPending() != want {
		t.Fatalf("welcome cursor %d, pending %d; want %d, %d: the mirror's cursor and what is after it",
			w.GetCursor(), w.GetSummary().GetPending(), confirmed, want)
	}
}

// At the end of an archive catch-up the device's consumer is moved to the
// cursor (positionTail) before it reads the tail the archive does not hold:
// it delivers only that tail, not the stretch the archive served again (the
// stream still holds it here: the archive serves it because the tail is
// long, TailScan), and its ack floor follows the device's confirmations. A
// consumer left where the catch-up began would deliver the whole stretch
// again, to be skipped entry by entry.
func TestConsumerMovesToTheCursorAtTheSwitchToTheTail(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.TailScan = 10
	n := testnode.StartNode(t, cfg, config.RoleAllInOne)
	conv := createConv(t, n, false, 1, 2)
	firstLogin(t, n, 2, "phone", "mobile")
	const archived, tail = 250, 5
	want := sendN(t, n, 1, conv, archived, "archived")
	waitArchived(t, n, 2*archived)
	time.Sleep(time.Second) // the gateway reads the archive's mark every 250 ms (partInfos)
	// The archiver cannot write: the next entries stay in the stream only.
	defer holdArchiver(t, n)()
	want = append(want, sendN(t, n, 1, conv, tail, "tail")...)

	const resets = `inboxd_gateway_consumer_requests_total{op="reset_to"}`
	const archivePages = `inboxd_gateway_backfill_pages_total{source="archive"}`
	resetsBefore, pagesBefore := metric(t, n, resets), metric(t, n, archivePages)
	c := dialRaw(t, n.Gateway.TCPAddr())
	c.rawHello(2, "phone", "mobile")
	got := c.readConfirming(nil, len(want), func(_ *pb.Batch, got []*pb.Message) bool { return len(got) >= len(want) })
	if len(got) != len(want) {
		t.Fatalf("the device got %d messages, want %d", len(got), len(want))
	}
	for i, m := range got {
		if m.GetMsgId() != want[i] {
			t.Fatalf("message %d is msg %d (seq %d), want %d: every message in order, once", i, m.GetMsgId(), m.GetSeq(), want[i])
		}
	}
	if d := metric(t, n, archivePages) - pagesBefore; d < 2 {
		t.Fatalf("%v pages came from the archive, want the archived stretch's", d)
	}
	if d := metric(t, n, resets) - resetsBefore; d != 1 {
		t.Fatalf("the consumer was moved %v times during the catch-up, want once: at the switch to the tail", d)
	}
	last := got[len(got)-1].GetSeq()
	js, err := jetstream.New(testnode.Admin(t, n))
	if err != nil {
		t.Fatal(err)
	}
	stream := streams.InboxStream(ids.Partition(2, testnode.Layout().InboxPartitions))
	var ci *jetstream.ConsumerInfo
	waitCond(t, 10*time.Second, "the tail confirmed on the consumer", func() (bool, string) {
		cons, err := js.Consumer(ctxT(t, 5*time.Second), stream, streams.DeviceConsumer(2, "phone"))
		if err != nil {
			return false, err.Error()
		}
		ci = cons.CachedInfo()
		return ci.AckFloor.Stream == last, fmt.Sprintf("ack floor %d, want %d (the last message's seq)", ci.AckFloor.Stream, last)
	})
	if ci.Delivered.Consumer > tail {
		t.Fatalf("the consumer made %d deliveries since its last move, want at most the %d of the tail: "+
			"it delivered the archived stretch again", ci.Delivered.Consumer, tail)
	}
}

// An inbox entry that does not decode (garbage published to a user's inbox
// subject, here by the admin user) is not skipped without a trace: it lands
// in inbox_quarantine with its raw bytes and the error, it is counted, and
// the archiver goes on: the messages after it are archived, the archive
// mark passes it, and the device gets them.
func TestUndecodableEntryIsQuarantinedAndTheArchiverGoesOn(t *testing.T) {
	n := hotWindowNode(t, nil)
	conv := createConv(t, n, false, 1, 2)
	before := sendN(t, n, 1, conv, 3, "before")
	waitArchived(t, n, 6)

	p := ids.Partition(2, testnode.Layout().InboxPartitions)
	adm := testnode.Admin(t, n)
	js, err := jetstream.New(adm)
	if err != nil {
		t.Fatal(err)
	}
	garbage := []byte{0xff, 0x01, 0xfe, 'n', 'o', 't', ' ', 'a', 'n', ' ', 'e', 'n', 't', 'r', 'y'}
	ack, err := js.Publish(ctxT(t, 5*time.Second), streams.InboxSubject(p, 2), garbage)
	if err != nil {
		t.Fatal(err)
	}
	after := sendN(t, n, 1, conv, 3, "after")
	waitArchived(t, n, 12)

	waitCond(t, 10*time.Second, "the entry quarantined", func() (bool, string) {
		k := count(t, n, `SELECT count(*) FROM inbox_quarantine`)
		return k == 1, fmt.Sprintf("%d rows", k)
	})
	q, err := n.Store.Quarantined(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 1 || q[0].Partition != p || q[0].Seq != ack.Sequence || q[0].Subject != streams.InboxSubject(p, 2) ||
		string(q[0].Raw) != string(garbage) || q[0].Err == "" {
		t.Fatalf("quarantine %+v; want the entry at seq %d with its raw bytes and an error", q, ack.Sequence)
	}
	if v := metric(t, n, "inboxd_archive_quarantined_entries_total"); v != 1 {
		t.Fatalf("inboxd_archive_quarantined_entries_total %v, want 1", v)
	}
	if got := count(t, n, `SELECT count(*) FROM inbox_archive WHERE uid = 2 AND seq = $1`, int64(ack.Sequence)); got != 0 {
		t.Fatalf("the garbage entry is in inbox_archive")
	}
	var mark int64
	if err := n.Store.Pool.QueryRow(context.Background(), `SELECT archived_seq FROM archive_progress WHERE partition = $1`, p).Scan(&mark); err != nil || uint64(mark) <= ack.Sequence {
		t.Fatalf("archive mark %d (%v): not past the quarantined entry %d", mark, err, ack.Sequence)
	}
	d := connectDevice(t, n, 2, "phone", deviceOpts{})
	checkOrderedOnce(t, d.waitFor(6, 20*time.Second), append(before, after...))
}

// A catch-up that reads a stretch the archive already holds from the
// stream (a short tail) does not lose what the trimmer purges under it: a
// purge moves the consumer past the purged entries silently, so the page
// read after it would jump them. Here the page waits for the user's
// backfill bucket (5 a second) while its 50 entries turn older than the
// hot window and are trimmed, and 5 newer ones arrive (not archived: the
// archiver cannot write); the fetch, which brings only those 5, is dropped
// and the stretch read from the archive instead.
func TestEntriesTrimmedUnderATailReadComeFromTheArchive(t *testing.T) {
	n := hotWindowNode(t, nil)
	gw := testnode.Gateway(t, n, gateway.Options{UserBackfillRate: 5, UserBackfillBurst: 5})
	conv := createConv(t, n, false, 1, 2)
	c := dialRaw(t, gw.TCPAddr())
	c.rawHello(2, "phone", "desktop")
	waitCond(t, 10*time.Second, "the device's cursor mirrored", func() (bool, string) {
		k := count(t, n, `SELECT count(*) FROM device_cursor WHERE uid = 2`)
		return k == 1, fmt.Sprintf("%d rows", k)
	})
	c.nc.Close()

	want := sendN(t, n, 1, conv, 50, "old")
	waitArchived(t, n, 100)
	c = dialRaw(t, gw.TCPAddr())
	c.rawHello(2, "phone", "desktop") // the pump positions the consumer and waits for 50 tokens: 9 s
	waitCond(t, 10*time.Second, "the 50 entries trimmed", func() (bool, string) {
		first, msgs := inboxState(t, n, 2)
		return msgs == 0, fmt.Sprintf("first seq %d, %d entries", first, msgs)
	})
	// The new ones stay in the stream: the archiver cannot write, so
	// they are neither archived nor trimmed.
	defer holdArchiver(t, n)()
	want = append(want, sendN(t, n, 1, conv, 5, "new")...)

	// The 5 new ones come live; the 50 by backfill, and they must not be
	// jumped.
	frames := c.frames()
	var got []*pb.Message
	timeout := time.After(30 * time.Second)
	for backfillDone := false; len(got) < len(want) || !backfillDone; {
		select {
		case m, ok := <-frames:
			if !ok {
				t.Fatalf("connection closed after %d of %d messages", len(got), len(want))
			}
			b, ok := m.(*pb.Batch)
			if !ok {
				continue
			}
			got = append(got, b.GetMessages()...)
			if b.GetBatchId() != 0 {
				c.write(&pb.Ack{BatchIds: []uint64{b.GetBatchId()}})
			}
			if b.GetLane() == pb.Lane_BACKFILL && !b.GetHasMore() {
				backfillDone = true
			}
		case <-timeout:
			t.Fatalf("after 30 s the device has %d of %d messages: %v", len(got), len(want), msgIDs(got))
		}
	}
	slices.SortFunc(got, func(a, b *pb.Message) int { return cmp.Compare(a.GetSeq(), b.GetSeq()) })
	if len(got) != len(want) {
		t.Fatalf("the device got %d messages, want %d: %v", len(got), len(want), msgIDs(got))
	}
	for i, m := range got {
		if m.GetMsgId() != want[i] {
			t.Fatalf("message %d by seq is msg %d, want %d: %v", i, m.GetMsgId(), want[i], msgIDs(got))
		}
	}
}

func msgIDs(ms []*pb.Message) []int64 {
	out := make([]int64, len(ms))
	for i, m := range ms {
		out[i] = m.GetMsgId()
	}
	return out
}
