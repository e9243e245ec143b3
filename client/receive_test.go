package client

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// checkOnceInOrder fails unless the handler got every message of want once
// and, within each conversation, in conv_seq order, except those it was
// told about: a "newest" one (ahead by design) or a Late one (behind, after
// its gap was given up on).
func checkOnceInOrder(t *testing.T, got []Message, want int) {
	t.Helper()
	ids := map[int64]int{}
	last := map[int64]int64{}
	for _, m := range got {
		ids[m.MsgID]++
		if ids[m.MsgID] > 1 {
			t.Errorf("msg %d (c%d#%d) handed over %d times: %v", m.MsgID, m.ConvID, m.ConvSeq, ids[m.MsgID], brief(got))
		}
		if m.Lane == "newest" || m.Late {
			continue
		}
		if m.ConvSeq <= last[m.ConvID] {
			t.Errorf("c%d#%d handed over after #%d, not flagged: %v", m.ConvID, m.ConvSeq, last[m.ConvID], brief(got))
		}
		last[m.ConvID] = m.ConvSeq
	}
	if len(ids) != want {
		t.Errorf("%d distinct messages handed over, want %d: %v", len(ids), want, brief(got))
	}
}

// A message below the conversation's high-water mark that was never handed
// over (the client released a later one after giving up on the gap) is a
// real message: it reaches the handler, once, flagged Late, and is
// confirmed. Here the inbox holds c1#3 before c1#1 and c1#2 (entries out of
// order after a fault); the backfill gap is final for a conversation first
// seen, so #3 goes first.
func TestLateMessageBelowHighWaterMarkHandedOverFlagged(t *testing.T) {
	s := newScripted(t, func(int, *pb.Hello) proto.Message { return welcome(3) })
	a := newApp()
	_, sc := dialScripted(t, s, Options{Handler: a.handle})

	sc.batch(wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 1, HasMore: true}, msg(1, 1, 3))
	sc.waitAcked(1)
	sc.batch(wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 2}, msg(2, 1, 1), msg(3, 1, 2))
	sc.waitAcked(2)

	got := a.quiet(200 * time.Millisecond)
	checkOnceInOrder(t, got, 3)
	for _, m := range got {
		if late := m.ConvSeq < 3; m.Late != late {
			t.Errorf("c%d#%d: Late %v, want %v", m.ConvID, m.ConvSeq, m.Late, late)
		}
	}
}

// A repeat of a message handed over so long ago that its msg_id left the
// dedupe set is still not handed over again: its conv_seq is at or below
// the conversation's high-water mark and was not passed over by a gap, so
// the client knows it handed it over. Here the ack of a batch is lost with
// the connection and the server sends the batch again.
func TestRepeatAfterDedupeEvictionNotHandedOverAgain(t *testing.T) {
	s := newScripted(t, func(int, *pb.Hello) proto.Message { return welcome(3) })
	a := newApp()
	_, sc := dialScripted(t, s, Options{Handler: a.handle, DedupeSize: 2})

	batch := []wire.Message{msg(1, 1, 1), msg(2, 1, 2), msg(3, 1, 3)}
	sc.batch(wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 1}, batch...)
	sc.waitAcked(1)
	a.waitN(t, 3)
	sc.close() // the ack is lost with the connection

	sc = s.next()
	sc.batch(wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 1}, batch...)
	sc.waitAcked(1) // a repeat is confirmed again

	checkOnceInOrder(t, a.quiet(200*time.Millisecond), 3)
}

// The newest page of an offline-too-long device (Batch.newest) is handed
// over at once, flagged Lane "newest", without a gap fill; the drain from
// the cursor then brings everything in conv_seq order and skips the newest
// ones (they do not count as wire duplicates), and the high-water mark
// moves past them: a live message after them is in order.
//
// Conversation 1 is followed (the application stored up to #2, which a gap
// before the newest page would fill by pull); conversation 2 is new here.
func TestNewestPageFirstOnceThenDrainInOrderWithoutPulls(t *testing.T) {
	var inbox []wire.Message // seq 1..14
	add := func(conv, convSeq int64) { inbox = append(inbox, msg(uint64(len(inbox)+1), conv, convSeq)) }
	for i := range int64(6) {
		add(1, 3+i) // c1#3..#8
		add(2, 1+i) // c2#1..#6
	}
	add(1, 9)
	add(1, 10)
	timeline := map[int64][]wire.Message{}
	for _, m := range inbox {
		timeline[m.ConvID] = append(timeline[m.ConvID], m)
	}
	newest := inbox[len(inbox)-5:] // c2#5 c1#8 c2#6 c1#9 c1#10

	s := newScripted(t, func(int, *pb.Hello) proto.Message {
		w := welcome(uint64(len(inbox)))
		w.OfflineTooLong = true
		return w
	})
	a := newApp()
	c, sc := dialScripted(t, s, Options{Handler: a.handle, GapWait: 50 * time.Millisecond,
		LastConvSeq: func(conv int64) int64 { return map[int64]int64{1: 2}[conv] }})
	sc.servePulls(timeline)

	sc.batch(wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 1, HasMore: true, Newest: true}, newest...)
	first := a.waitN(t, len(newest))
	sc.waitAcked(1)
	for i, m := range first[:len(newest)] {
		if m.MsgID != newest[i].MsgID || m.Lane != "newest" {
			t.Errorf("handed over #%d: c%d#%d lane %s; want c%d#%d lane newest", i, m.ConvID, m.ConvSeq, m.Lane, newest[i].ConvID, newest[i].ConvSeq)
		}
	}
	sc.batch(wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 2, HasMore: true}, inbox[:7]...)
	sc.waitAcked(2)
	sc.batch(wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 3}, inbox[7:]...)
	sc.waitAcked(3)
	live := msg(15, 1, 11)
	sc.batch(wire.BatchHeader{Lane: pb.Lane_LIVE, BatchID: 4}, live)
	sc.waitAcked(4)

	got := a.quiet(200 * time.Millisecond)
	checkOnceInOrder(t, got, len(inbox)+1)
	if last := got[len(got)-1]; last.MsgID != live.MsgID || last.Lane != "live" {
		t.Errorf("last handed over: c%d#%d (%s), want the live c1#11", last.ConvID, last.ConvSeq, last.Lane)
	}
	if pulls := ofType[*pb.Pull](sc.frames()); len(pulls) != 0 {
		t.Errorf("the client pulled %d times: %v", len(pulls), pulls)
	}
	if st := c.Stats(); st.Duplicates != 0 || st.NewestAgain != len(newest) {
		t.Errorf("stats %+v: want no wire duplicates and %d newest messages skipped by the drain", st, len(newest))
	}
}

// A pulled message (it fills a gap; not an inbox entry, no batch) that the
// handler refused stays pending; the connection dropping meanwhile must not
// take it down with the session's unconfirmed entries (nor crash the
// receiver), and it is handed over once the handler takes it.
func TestPulledMessageSurvivesConnectionLoss(t *testing.T) {
	timeline := map[int64][]wire.Message{1: {msg(0, 1, 1), msg(0, 1, 2), msg(0, 1, 3)}}
	s := newScripted(t, func(int, *pb.Hello) proto.Message { return welcome(1) })
	a := newApp()
	var allow atomic.Bool
	refused := make(chan struct{}, 1)
	handler := func(m Message) error {
		if m.Lane == "pull" && !allow.Load() {
			select {
			case refused <- struct{}{}:
			default:
			}
			return errors.New("disk full")
		}
		return a.handle(m)
	}
	_, sc := dialScripted(t, s, Options{Handler: handler, GapWait: 40 * time.Millisecond,
		LastConvSeq: func(int64) int64 { return 1 }})
	sc.servePulls(timeline)
	sc.batch(wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 1}, msg(5, 1, 3))
	select {
	case <-refused:
	case <-time.After(10 * time.Second):
		t.Fatal("the pulled message never reached the handler")
	}
	sc.close()
	sc = s.next() // the client saw the connection go and came back
	sc.servePulls(timeline)
	allow.Store(true)
	sc.batch(wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 1}, msg(5, 1, 3))
	sc.waitAcked(1)
	got := a.quiet(200 * time.Millisecond)
	if len(got) != 2 || got[0].ConvSeq != 2 || got[1].ConvSeq != 3 {
		t.Fatalf("handed over %v, want c1#2 then c1#3", brief(got))
	}
}

// A batch is confirmed only once every message of it was handled (the
// cursor rule: confirm after the application has them). Here batch 1 holds
// c1#1 and c1#3 while the backfill is still moving: #1 is handled, #3 waits
// for #2, and no ack of batch 1 goes out meanwhile; once batch 2 brings #2,
// both batches are acked.
func TestBatchConfirmedOnlyAfterEveryMessageHandled(t *testing.T) {
	s := newScripted(t, func(int, *pb.Hello) proto.Message { return welcome(3) })
	a := newApp()
	_, sc := dialScripted(t, s, Options{Handler: a.handle})

	sc.batch(wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 1, HasMore: true}, msg(1, 1, 1), msg(3, 1, 3))
	a.waitN(t, 1)
	time.Sleep(300 * time.Millisecond) // several receiver ticks: time for a wrong ack to go out
	if ackedBatches(sc.frames())[1] {
		t.Fatalf("batch 1 acked while c1#3 was not handled: %v", describe(sc.frames()))
	}
	sc.batch(wire.BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 2}, msg(2, 1, 2))
	sc.waitAcked(1, 2)
	checkOnceInOrder(t, a.quiet(100*time.Millisecond), 3)
}
