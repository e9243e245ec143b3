package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// An INBOX stream recreated empty (docs/operations.md "Restore and stream
// epochs") makes no device skip: a device connected at the moment of the
// loss and one offline since before it both end up with every message the
// archive holds and every message sent after the recreation, each once
// and in conversation order, and the messages written into the new stream
// are archived; so does an offline device whose mirrored cursor of the
// lost stream is above the new stream's first entry. Two ways the stream
// comes back: the syncer finds it
// missing and creates it again ("removed"), or an operator creates it
// empty before the syncer looks ("created by hand": the syncer renumbers
// it).
func TestRecreatedInboxStreamMakesNoDeviceSkip(t *testing.T) {
	for _, byHand := range []bool{false, true} {
		name := "removed"
		if byHand {
			name = "created by hand"
		}
		t.Run(name, func(t *testing.T) { testRecreatedInboxStream(t, byHand) })
	}
}

func testRecreatedInboxStream(t *testing.T, byHand bool) {
	n := hotWindowNode(t, nil)
	conv := createConv(t, n, false, 1, 2)
	p := ids.Partition(2, testnode.Layout().InboxPartitions)

	online := connectDevice(t, n, 2, "online", deviceOpts{})
	offline := connectDevice(t, n, 2, "offline", deviceOpts{})
	late := connectDevice(t, n, 2, "late", deviceOpts{})
	first := sendN(t, n, 1, conv, 20, "first")
	offline.waitFor(20, 20*time.Second)
	late.waitFor(20, 20*time.Second)
	waitCond(t, 10*time.Second, "the offline devices' cursors mirrored", func() (bool, string) {
		k := count(t, n, `SELECT count(*) FROM device_cursor WHERE uid = 2 AND device IN ('offline', 'late') AND ack_seq > 0`)
		return k == 2, fmt.Sprintf("%d rows", k)
	})
	offline.close()
	late.close()
	whileAway := sendN(t, n, 1, conv, 20, "away")
	online.waitFor(40, 20*time.Second)
	waitArchived(t, n, 80) // both members' entries of 40 messages

	// The stream is lost.
	js, err := jetstream.New(testnode.Admin(t, n))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 2*time.Minute)
	before, err := js.Stream(ctx, streams.InboxStream(p))
	if err != nil {
		t.Fatal(err)
	}
	oldLast := before.CachedInfo().State.LastSeq
	cfg := before.CachedInfo().Config
	if err := js.DeleteStream(ctx, streams.InboxStream(p)); err != nil {
		t.Fatal(err)
	}
	if byHand {
		cfg.FirstSeq = 0
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	after := sendN(t, n, 1, conv, 20, "after") // STORED only once the stream is back

	// Not fatal: the checks below say what a stream numbered from 1 again
	// does to the devices.
	var s jetstream.Stream
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if s, err = js.Stream(ctx, streams.InboxStream(p)); err != nil {
			t.Fatal(err)
		}
		if first := s.CachedInfo().State.FirstSeq; first > oldLast || time.Now().After(deadline) {
			if first <= oldLast {
				t.Errorf("the new stream's first seq is %d, not above the lost stream's last %d", first, oldLast)
			}
			break
		}
	}
	all := append(append(append([]int64(nil), first...), whileAway...), after...)
	checkGotAll(t, "the device connected at the loss", online.waitFor(len(all), 60*time.Second), all)
	again := connectDevice(t, n, 2, "offline", deviceOpts{})
	checkGotAll(t, "the device offline since before the loss", again.waitFor(40, 60*time.Second), append(append([]int64(nil), whileAway...), after...))
	// A session of the lost stream may mirror a cursor above what the
	// syncer knew when it numbered the new stream (its flush a second
	// late): "late" confirmed the lost stream's entries up to there (all of
	// them). Its cursor of the old epoch is trusted only up to the new
	// epoch's start - 1, or the device would skip the new stream's first
	// entries.
	if _, err := n.Store.Pool.Exec(ctx, `UPDATE device_cursor SET ack_seq = $1 WHERE uid = 2 AND device = 'late'`,
		int64(s.CachedInfo().State.FirstSeq)+10); err != nil {
		t.Fatal(err)
	}
	lateAgain := connectDevice(t, n, 2, "late", deviceOpts{})
	checkGotAll(t, "the device with a late mirror of the lost stream", lateAgain.waitFor(20, 60*time.Second), after)
	// The messages written into the new stream are archived: 40 earlier
	// ones and 20 new ones, of both members.
	waitArchived(t, n, 120)
	if k := count(t, n, `SELECT count(*) FROM inbox_archive WHERE uid = 2 AND seq > $1`, int64(oldLast)); k != 20 {
		t.Errorf("%d entries of uid 2 archived above the lost stream's last seq %d, want 20", k, oldLast)
	}
	if e := metric(t, n, "inboxd_archive_stream_epochs_total"); e != 1 {
		t.Errorf("%v stream epochs counted, want 1", e)
	}
	waitCond(t, 10*time.Second, "the device cursors mirrored in the new stream's epoch", func() (bool, string) {
		k := count(t, n, `SELECT count(*) FROM device_cursor WHERE uid = 2 AND epoch = $1 AND ack_seq > $2`, s.CachedInfo().Created.UnixNano(), int64(oldLast))
		return k == 3, fmt.Sprintf("%d of 3", k)
	})
}

// checkGotAll fails unless got holds every msg_id of want (after dedupe by
// msg_id, as the client does), each conversation's messages in conv_seq
// order.
func checkGotAll(t *testing.T, who string, got []client.Message, want []int64) {
	t.Helper()
	seen := map[int64]bool{}
	last := map[int64]int64{}
	for _, m := range got {
		if seen[m.MsgID] {
			t.Errorf("%s: msg %d handed over twice", who, m.MsgID)
		}
		seen[m.MsgID] = true
		if m.ConvSeq <= last[m.ConvID] {
			t.Errorf("%s: conv %d seq %d after %d", who, m.ConvID, m.ConvSeq, last[m.ConvID])
		}
		last[m.ConvID] = m.ConvSeq
	}
	missing := 0
	for _, id := range want {
		if !seen[id] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%s skipped %d of %d messages", who, missing, len(want))
	}
}

// A device connected at the loss that had confirmed entries neither the
// archiver nor the cursor mirror had recorded yet: the fanout recorded them
// (their archive rows and its written highs, before STORED), so the new
// stream starts above them, and the device, which goes on from those
// positions, skips none of the new stream's entries.
func TestRecreatedInboxStreamStartsAboveWhatTheFanoutWrote(t *testing.T) {
	n := hotWindowNode(t, nil)
	conv := createConv(t, n, false, 1, 2)
	p := ids.Partition(2, testnode.Layout().InboxPartitions)
	online := connectDevice(t, n, 2, "online", deviceOpts{})
	first := sendN(t, n, 1, conv, 20, "first")
	online.waitFor(20, 20*time.Second)
	waitArchived(t, n, 40)
	waitCond(t, 10*time.Second, "the device's cursor mirrored", func() (bool, string) {
		k := count(t, n, `SELECT count(*) FROM device_cursor WHERE uid = 2 AND ack_seq >= 20`)
		return k == 1, fmt.Sprintf("%d rows", k)
	})

	// What comes now neither reaches the archiver (its consumer is paused)
	// nor the mirror (its table is locked for writes).
	js, err := jetstream.New(testnode.Admin(t, n))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 3*time.Minute)
	if _, err := js.PauseConsumer(ctx, streams.InboxStream(p), "archiver", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	tx, err := n.Store.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `LOCK TABLE device_cursor IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	ahead := sendN(t, n, 1, conv, 20, "ahead")
	online.waitFor(40, 20*time.Second)
	before, err := js.Stream(ctx, streams.InboxStream(p))
	if err != nil {
		t.Fatal(err)
	}
	last := before.CachedInfo().State.LastSeq

	if err := js.DeleteStream(ctx, streams.InboxStream(p)); err != nil {
		t.Fatal(err)
	}
	after := sendN(t, n, 1, conv, 20, "after")
	s, err := js.Stream(ctx, streams.InboxStream(p))
	if err != nil {
		t.Fatal(err)
	}
	if first := s.CachedInfo().State.FirstSeq; first <= last {
		t.Fatalf("the new stream starts at %d, at or below the lost stream's last seq %d", first, last)
	}
	all := append(append(append([]int64(nil), first...), ahead...), after...)
	checkGotAll(t, "the device connected at the loss", online.waitFor(len(all), 60*time.Second), all)
	_ = tx.Rollback(context.Background())
}
