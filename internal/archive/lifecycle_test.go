package archive_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/inboxd/inboxd/internal/archive"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
)

// hotWindow is the tests' hot window: entries older than this may be
// trimmed once archived.
const hotWindow = 2 * time.Second

// rig is one INBOX partition with a 2 s hot window, a Postgres archive and
// archivers started and stopped by the test.
type rig struct {
	t   *testing.T
	ctx context.Context
	js  jetstream.JetStream
	st  *store.Store
	l   streams.Layout
	reg *prometheus.Registry // the last archiver's metrics
}

func newRig(t *testing.T) *rig {
	_, js := testenv.JetStream(t)
	r := &rig{t: t, ctx: context.Background(), js: js, st: testenv.Store(t), l: streams.Layout{InboxPartitions: 1, SendPartitions: 1}}
	if err := streams.EnsureStreams(r.ctx, js, r.l, hotWindow, streams.DefaultReplicas); err != nil {
		t.Fatal(err)
	}
	return r
}

// publish writes messages from..to (msg_id = conv_seq = i) into uid 42's inbox.
func (r *rig) publish(from, to int) {
	r.t.Helper()
	for i := from; i <= to; i++ {
		e := streams.Entry{MsgID: int64(i), ConvID: 1, ConvSeq: int64(i), SenderUID: 9, Kind: 1}
		b, err := e.Marshal()
		if err != nil {
			r.t.Fatal(err)
		}
		if _, err := r.js.PublishMsg(r.ctx, e.Msg(0, 42, b, streams.MessageDedupeID(int64(i), 42))); err != nil {
			r.t.Fatal(err)
		}
	}
}

// start runs an archiver (with its trimmer, rounds of 200 ms) and returns
// its stop.
func (r *rig) start() (stop func()) {
	return r.startWith(archive.Options{})
}

// startWith is start with options (the rig's layout, hot window and
// trimmer round are set on them).
func (r *rig) startWith(o archive.Options) (stop func()) {
	ctx, cancel := context.WithCancel(r.ctx)
	r.reg = prometheus.NewRegistry()
	o.Layout, o.HotWindow, o.TrimEvery = r.l, hotWindow, 200*time.Millisecond
	a := archive.New(o, testenv.Logger(r.t), r.js, r.st, r.reg)
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	r.t.Cleanup(stop)
	return stop
}

// state returns INBOX_0's first sequence and entry count.
func (r *rig) state() (first, msgs uint64) {
	r.t.Helper()
	s, err := r.js.Stream(r.ctx, streams.InboxStream(0))
	if err != nil {
		r.t.Fatal(err)
	}
	st := s.CachedInfo().State
	return st.FirstSeq, st.Msgs
}

func (r *rig) archived() int {
	r.t.Helper()
	var n int
	if err := r.st.Pool.QueryRow(r.ctx, `SELECT count(*) FROM inbox_archive`).Scan(&n); err != nil {
		r.t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds, failing after 20 s with what it says.
func (r *rig) waitFor(what string, cond func() (bool, string)) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("waiting for %s: %s", what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *rig) waitArchivedThrough(seq uint64) {
	r.t.Helper()
	r.waitFor(fmt.Sprintf("the archive mark to reach %d", seq), func() (bool, string) {
		got, err := r.st.ArchivedThrough(r.ctx, 0)
		return err == nil && got >= seq, fmt.Sprintf("mark %d, %v", got, err)
	})
}

// metric returns the value of a counter or gauge of the last archiver,
// summed over its labels.
func (r *rig) metric(name string) float64 {
	r.t.Helper()
	mfs, err := r.reg.Gather()
	if err != nil {
		r.t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if c := m.GetCounter(); c != nil {
				sum += c.GetValue()
			} else {
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// An archiver that is down for longer than the hot window loses nothing:
// the entries stay in the stream until it is back, it archives every one,
// and only then are they trimmed. (With the window enforced by a MaxAge,
// as before, the 20 entries written while it was down expired unarchived
// and the archive skipped them: "inbox_archive holds 6 of the 26".)
func TestArchiverStoppedLongerThanTheHotWindowLosesNothing(t *testing.T) {
	r := newRig(t)
	stop := r.start()
	r.publish(1, 5)
	r.waitArchivedThrough(5)
	stop()

	r.publish(6, 25)
	time.Sleep(hotWindow + time.Second) // down for longer than the window
	if first, msgs := r.state(); first > 6 || msgs < 20 {
		t.Fatalf("with the archiver down, INBOX_0 went to first seq %d, %d entries: unarchived entries 6..25 were dropped", first, msgs)
	}

	r.start()
	r.publish(26, 26)
	r.waitArchivedThrough(26)
	if got := r.archived(); got != 26 {
		t.Fatalf("archive mark 26, but inbox_archive holds %d of the 26 entries: %d lost", got, 26-got)
	}
	// Archived and older than the window: trimmed.
	r.waitFor("entries 1..25 to be trimmed", func() (bool, string) {
		first, msgs := r.state()
		return first > 25, fmt.Sprintf("first seq %d, %d entries", first, msgs)
	})
	if lost := r.metric("inboxd_archive_lost_entries_total"); lost != 0 {
		t.Fatalf("%v entries counted lost", lost)
	}
}

// The trimmer trims only what is archived: while the archiver cannot write
// (Postgres holds a lock on the archive mark), entries older than the hot
// window stay in the stream, and the lag metrics say how far behind it is;
// once it writes again they are archived, then trimmed (the stream's first
// sequence moves past them, and the trimmed-entries counter counts them),
// while entries younger than the window stay.
func TestTrimmerTrimsOnlyArchivedEntriesOlderThanTheHotWindow(t *testing.T) {
	r := newRig(t)
	r.start()
	r.publish(1, 3)
	r.waitArchivedThrough(3)

	// Block the archiver's writes; the trimmer still reads the marks.
	tx, err := r.st.Pool.Begin(r.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(r.ctx) }()
	if _, err := tx.Exec(r.ctx, `LOCK TABLE archive_progress IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	r.publish(4, 30)
	time.Sleep(hotWindow + time.Second)
	if first, msgs := r.state(); first > 4 || msgs < 27 {
		t.Fatalf("archiver stuck: INBOX_0 went to first seq %d, %d entries: unarchived entries were trimmed", first, msgs)
	}
	r.waitFor("the lag metrics of 27 entries older than the window", func() (bool, string) {
		lag, age := r.metric("inboxd_archive_lag_entries"), r.metric("inboxd_archive_oldest_unarchived_seconds")
		return lag == 27 && age >= hotWindow.Seconds(), fmt.Sprintf("lag %v entries, oldest %vs", lag, age)
	})

	if err := tx.Rollback(r.ctx); err != nil {
		t.Fatal(err)
	}
	r.waitArchivedThrough(30)
	r.publish(31, 35) // younger than the window: they stay
	r.waitFor("entries 1..30 to be trimmed", func() (bool, string) {
		first, msgs := r.state()
		return first == 31 && msgs == 5, fmt.Sprintf("first seq %d, %d entries", first, msgs)
	})
	if got := r.archived(); got != 35 {
		t.Fatalf("inbox_archive holds %d entries, want 35", got)
	}
	if trimmed := r.metric("inboxd_archive_trimmed_entries_total"); trimmed != 30 {
		t.Fatalf("inboxd_archive_trimmed_entries_total %v, want 30", trimmed)
	}
	r.waitFor("the lag metrics to clear", func() (bool, string) {
		lag, age := r.metric("inboxd_archive_lag_entries"), r.metric("inboxd_archive_oldest_unarchived_seconds")
		return lag == 0 && age == 0, fmt.Sprintf("lag %v entries, oldest %vs", lag, age)
	})
	// Entries 31..35 are archived now too; they stay their hot window.
	time.Sleep(500 * time.Millisecond)
	if first, _ := r.state(); first != 31 {
		t.Fatalf("entries younger than the hot window trimmed: first seq %d", first)
	}
}

// An entry removed from the stream before it was archived (an operator's
// purge: nothing of inboxd's does that) is not passed silently: it is
// counted lost and logged, and the archive goes on after it.
func TestEntriesPurgedBeforeArchivingAreCountedLost(t *testing.T) {
	r := newRig(t)
	stop := r.start()
	r.publish(1, 2)
	r.waitArchivedThrough(2)
	stop()
	r.publish(3, 10)
	s, err := r.js.Stream(r.ctx, streams.InboxStream(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Purge(r.ctx, jetstream.WithPurgeSequence(8)); err != nil { // entries 3..7
		t.Fatal(err)
	}
	r.start()
	r.waitArchivedThrough(10)
	if lost := r.metric("inboxd_archive_lost_entries_total"); lost != 5 {
		t.Fatalf("inboxd_archive_lost_entries_total %v, want 5 (entries 3..7)", lost)
	}
	if got := r.archived(); got != 5 {
		t.Fatalf("inbox_archive holds %d entries, want 5 (1, 2, 8, 9, 10)", got)
	}
}

// The trimmer trims by the hot window the streams record, so a documented
// change (streams.ChangeHotWindow: inboxctl streams set) takes effect at
// its next round, without a restart: archived entries kept under a 1 h
// window are trimmed once the window is 2 s.
func TestTrimmerFollowsAHotWindowChange(t *testing.T) {
	r := newRig(t)
	if _, err := streams.ChangeHotWindow(r.ctx, r.js, time.Hour); err != nil {
		t.Fatal(err)
	}
	r.start()
	r.publish(1, 10)
	r.waitArchivedThrough(10)
	time.Sleep(hotWindow + time.Second)
	if first, _ := r.state(); first != 1 {
		t.Fatalf("entries younger than the 1 h window trimmed: first seq %d", first)
	}
	if _, err := streams.ChangeHotWindow(r.ctx, r.js, hotWindow); err != nil {
		t.Fatal(err)
	}
	r.waitFor("entries 1..10 to be trimmed under the new window", func() (bool, string) {
		first, msgs := r.state()
		return first == 11 && msgs == 0, fmt.Sprintf("first seq %d, %d entries", first, msgs)
	})
}

// TestArchiverLingersToBatchEntries: entries that trickle in, one every
// 10 ms as live traffic brings them, are archived in a few transactions,
// not one each (every archive commit is a WAL flush that live messages'
// commits queue behind): a batch waits Linger after its first entry.
func TestArchiverLingersToBatchEntries(t *testing.T) {
	r := newRig(t)
	r.startWith(archive.Options{Linger: time.Second})
	for i := 1; i <= 20; i++ {
		r.publish(i, i)
		time.Sleep(10 * time.Millisecond)
	}
	r.waitArchivedThrough(20)
	if n := r.metric("inboxd_archive_batches_total"); n > 3 {
		t.Fatalf("20 entries over about 0.3 s archived in %v transactions, want at most 3 with a 1 s linger", n)
	}
	if got := r.archived(); got != 20 {
		t.Fatalf("%d entries archived, want 20", got)
	}
}

// The archiver's consumer keeps its state in memory: a cluster whose every
// server restarted recreates it from its definition, at the stream's first
// entry. The archiver puts it at its mark instead of reading the hot
// window through, and archives what comes next, each entry once.
func TestArchiverConsumerBelowTheMarkIsPutAtTheMark(t *testing.T) {
	r := newRig(t)
	r.startWith(archive.Options{BatchSize: 50}) // the 300 come back in six batches
	r.publish(1, 300)
	r.waitArchivedThrough(300)
	c, err := r.js.Consumer(r.ctx, streams.InboxStream(0), "archiver")
	if err != nil {
		t.Fatal(err)
	}
	if !c.CachedInfo().Config.MemoryStorage {
		t.Fatal("the archiver's consumer keeps its state in a file; want memory (jetstream/consumers/INBOX_archiver.json)")
	}
	if _, err := r.js.ResetConsumerToSequence(r.ctx, streams.InboxStream(0), "archiver", 1); err != nil {
		t.Fatal(err)
	}
	r.waitFor("the archiver to put its consumer at the mark", func() (bool, string) {
		n := r.metric("inboxd_archive_skips_total")
		return n >= 1, fmt.Sprintf("inboxd_archive_skips_total %v", n)
	})
	r.publish(301, 305)
	r.waitArchivedThrough(305)
	if got := r.archived(); got != 305 {
		t.Fatalf("inbox_archive holds %d entries, want 305", got)
	}
	if gaps, lost := r.metric("inboxd_archive_gaps_total"), r.metric("inboxd_archive_lost_entries_total"); gaps != 0 || lost != 0 {
		t.Fatalf("gaps %v, lost %v", gaps, lost)
	}
}
