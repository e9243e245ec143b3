package archive

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
)

// cleanupEnv is a real JetStream server with the INBOX streams and a real
// Postgres database: the cleaner's whole world, with the archive and the
// device cursors written by the test as the archiver and the gateways
// would write them.
type cleanupEnv struct {
	t      *testing.T
	ctx    context.Context
	layout streams.Layout
	nc     *nats.Conn
	js     jetstream.JetStream
	st     *store.Store
	seqs   map[int64][]uint64 // what was published per uid, in order
	msgID  int64
}

func newCleanupEnv(t *testing.T) *cleanupEnv {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	nc, js := testenv.JetStream(t)
	l := streams.Layout{InboxPartitions: 2, SendPartitions: 1}
	if err := streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, streams.DefaultReplicas); err != nil {
		t.Fatal(err)
	}
	return &cleanupEnv{t: t, ctx: ctx, layout: l, nc: nc, js: js, st: testenv.Store(t), seqs: map[int64][]uint64{}}
}

// uidIn returns the n-th uid (from 1 up) that lives in partition p.
func (e *cleanupEnv) uidIn(p, n int) int64 {
	for uid := int64(1); ; uid++ {
		if ids.Partition(uid, e.layout.InboxPartitions) == p {
			if n--; n == 0 {
				return uid
			}
		}
	}
}

// publish writes n inbox entries of uid and returns their sequences.
func (e *cleanupEnv) publish(uid int64, n int) []uint64 {
	e.t.Helper()
	p := ids.Partition(uid, e.layout.InboxPartitions)
	var out []uint64
	for range n {
		e.msgID++
		en := streams.Entry{MsgID: e.msgID, ConvID: 1, ConvSeq: e.msgID, SenderUID: 1, Kind: 1, CreatedAtMs: time.Now().UnixMilli()}
		body, err := en.Marshal()
		if err != nil {
			e.t.Fatal(err)
		}
		ack, err := e.js.PublishMsg(e.ctx, en.Msg(p, uid, body, streams.MessageDedupeID(e.msgID, uid)))
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, ack.Sequence)
	}
	e.seqs[uid] = append(e.seqs[uid], out...)
	return out
}

// archive copies the published entries of partition p up to upTo into
// inbox_archive and sets its archived_seq there, as the archiver does.
func (e *cleanupEnv) archive(p int, upTo uint64) {
	e.t.Helper()
	var rows []store.ArchivedEntry
	for uid, seqs := range e.seqs {
		if ids.Partition(uid, e.layout.InboxPartitions) != p {
			continue
		}
		for _, s := range seqs {
			if s <= upTo {
				rows = append(rows, store.ArchivedEntry{UID: uid, Seq: s, MsgID: int64(s), ConvID: 1, ConvSeq: int64(s), Kind: 1})
			}
		}
	}
	if err := e.st.ArchiveEntries(e.ctx, p, rows, upTo); err != nil {
		e.t.Fatal(err)
	}
}

// lastSeq is partition p's newest sequence.
func (e *cleanupEnv) lastSeq(p int) uint64 {
	e.t.Helper()
	s, err := e.js.Stream(e.ctx, streams.InboxStream(p))
	if err != nil {
		e.t.Fatal(err)
	}
	return s.CachedInfo().State.LastSeq
}

// confirm mirrors device cursors as the gateways do.
func (e *cleanupEnv) confirm(uid int64, acks map[string]uint64) {
	e.t.Helper()
	var cs []store.DeviceCursor
	for dev, seq := range acks {
		cs = append(cs, store.DeviceCursor{UID: uid, Device: dev, Consumer: streams.DeviceConsumer(uid, dev), AckSeq: seq})
	}
	if err := e.st.SaveDeviceCursors(e.ctx, cs); err != nil {
		e.t.Fatal(err)
	}
}

// inStream returns the sequences of uid's entries still in its stream,
// read as any client would (an ordered consumer on the user's subject).
func (e *cleanupEnv) inStream(uid int64) []uint64 {
	e.t.Helper()
	var out []uint64
	for _, en := range testenv.InboxEntries(e.t, e.nc, e.layout, uid) {
		out = append(out, en.Seq)
	}
	return out
}

func (e *cleanupEnv) cleaner(opts CleanupOptions) (*Cleaner, *prometheus.Registry) {
	e.t.Helper()
	opts.Layout = e.layout
	reg := prometheus.NewRegistry()
	c, err := NewCleaner(opts, testenv.Logger(e.t), e.nc, e.st, reg)
	if err != nil {
		e.t.Fatal(err)
	}
	return c, reg
}

// from returns the elements of seqs at or above s.
func from(seqs []uint64, s uint64) []uint64 {
	var out []uint64
	for _, x := range seqs {
		if x >= s {
			out = append(out, x)
		}
	}
	return out
}

// An early cleanup round removes from each user's subject exactly what lies
// below all of its bounds, and keeps the rest: entries every device
// confirmed go; those above the lowest device's cursor (a device behind),
// above the partition's archived_seq (not archived yet), of the new-device
// window by time, and the newest NewDeviceMax of that window stay. A user
// with no device row keeps only what the window needs. Each user exercises
// one bound; counts come from the stream itself.
func TestCleanupRemovesOnlyBelowEveryBound(t *testing.T) {
	e := newCleanupEnv(t)
	const window, margin, newest = 1500 * time.Millisecond, 200 * time.Millisecond, 3
	var (
		confirmed = e.uidIn(0, 1) // two devices confirmed everything
		behind    = e.uidIn(0, 2) // one device confirmed half
		noDevice  = e.uidIn(0, 3) // no device row at all
		recent    = e.uidIn(0, 4) // some entries inside the window by time
		many      = e.uidIn(0, 5) // more entries inside the window than NewDeviceMax
		unarch    = e.uidIn(1, 1) // alone in partition 1, half of it archived
	)
	// Old entries: outside the window once it has passed.
	for _, uid := range []int64{confirmed, behind, noDevice, recent, unarch} {
		e.publish(uid, 10)
	}
	time.Sleep(window + margin + 200*time.Millisecond)
	// New entries: inside the window.
	recentNew := e.publish(recent, 2)
	manyNew := e.publish(many, 8)
	e.archive(0, e.lastSeq(0))
	e.archive(1, e.seqs[unarch][4]) // the first 5 of unarch's 10
	last := func(uid int64) uint64 { return e.seqs[uid][len(e.seqs[uid])-1] }
	e.confirm(confirmed, map[string]uint64{"phone": last(confirmed), "laptop": last(confirmed) + 100})
	e.confirm(behind, map[string]uint64{"phone": last(behind), "laptop": e.seqs[behind][4]})
	e.confirm(recent, map[string]uint64{"phone": last(recent)})
	e.confirm(many, map[string]uint64{"phone": last(many)})
	e.confirm(unarch, map[string]uint64{"phone": last(unarch)})

	c, reg := e.cleaner(CleanupOptions{Rate: 1000, Batch: 100, Margin: margin, NewDeviceWindow: window, NewDeviceMax: newest})
	// Two rounds a margin apart: the newest-NewDeviceMax bound counts the
	// archive as the first round saw it (a new device that logged in since
	// counted at least those).
	if _, err := c.round(e.ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(margin + 50*time.Millisecond)
	if _, err := c.round(e.ctx); err != nil {
		t.Fatal(err)
	}
	want := map[int64][]uint64{
		confirmed: nil,
		behind:    from(e.seqs[behind], e.seqs[behind][5]),
		noDevice:  nil,
		recent:    recentNew,
		many:      manyNew[len(manyNew)-newest:],
		unarch:    from(e.seqs[unarch], e.seqs[unarch][5]),
	}
	names := map[int64]string{confirmed: "confirmed by every device", behind: "a device behind", noDevice: "no device",
		recent: "inside the window by time", many: "more than NewDeviceMax in the window", unarch: "half archived"}
	var removed int
	for uid, w := range want {
		got := e.inStream(uid)
		if !slices.Equal(got, w) {
			t.Errorf("%s (uid %d): stream holds %v, want %v (published %v)", names[uid], uid, got, w, e.seqs[uid])
		}
		removed += len(e.seqs[uid]) - len(w)
	}
	if got := counter(t, reg, "inboxd_cleanup_entries_removed_total"); int(got) != removed {
		t.Errorf("inboxd_cleanup_entries_removed_total = %v, want %d", got, removed)
	}
	// A round with nothing left to remove purges nothing.
	purges := counter(t, reg, "inboxd_cleanup_purges_total")
	if rs, err := c.round(e.ctx); err != nil || rs.purges != 0 {
		t.Errorf("a third round: %+v, %v; want no purge", rs, err)
	}
	if got := counter(t, reg, "inboxd_cleanup_purges_total"); got != purges {
		t.Errorf("purges went from %v to %v in a round with nothing to remove", purges, got)
	}
}

// counter reads a registered counter's value.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// A round looks at Batch users only, after the previous round's last uid,
// and the sweep wraps around: with 5 users and batches of 2, the third
// round reaches the fifth user and the fourth starts over.
func TestCleanupSweepsUsersInBatches(t *testing.T) {
	e := newCleanupEnv(t)
	var uids []int64
	for i := 1; i <= 5; i++ {
		uid := e.uidIn(0, i)
		uids = append(uids, uid)
		e.publish(uid, 3)
	}
	const window = 300 * time.Millisecond
	time.Sleep(window + 2*window)
	e.archive(0, e.lastSeq(0))
	for _, uid := range uids {
		e.confirm(uid, map[string]uint64{"phone": e.seqs[uid][2]})
	}
	c, _ := e.cleaner(CleanupOptions{Rate: 1000, Batch: 2, Margin: window, NewDeviceWindow: window, NewDeviceMax: 100})
	for round, wantClean := range []int{2, 4, 5} {
		rs, err := c.round(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if rs.swept != (round == 2) {
			t.Errorf("round %d: swept %v", round+1, rs.swept)
		}
		for i, uid := range uids {
			if left := len(e.inStream(uid)); (i < wantClean) != (left == 0) {
				t.Errorf("after round %d: user %d of 5 (uid %d) has %d entries in the stream; want the first %d cleaned", round+1, i+1, uid, left, wantClean)
			}
		}
	}
	if rs, err := c.round(e.ctx); err != nil || rs.users != 2 || rs.purges != 0 {
		t.Errorf("the next sweep's first round: %+v, %v; want 2 users looked at again, nothing to purge", rs, err)
	}
}

// newDevice creates a device consumer the way a gateway does at a device's
// first login (internal/gateway/consumer.go: the window by start time,
// capped to the newest max archived entries), without the device_cursor
// row its gateway writes about a second later. It returns the consumer and
// the first sequence it delivers.
func (e *cleanupEnv) newDevice(uid int64, device string, window time.Duration, max int) (jetstream.Consumer, uint64) {
	e.t.Helper()
	p := ids.Partition(uid, e.layout.InboxPartitions)
	cfg, err := streams.NewDeviceConsumerConfig(p, uid, device, time.Now().Add(-window), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	cons, err := e.js.CreateConsumer(e.ctx, streams.InboxStream(p), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	if nth, ok, err := e.st.NthNewestSeq(e.ctx, uid, max); err != nil {
		e.t.Fatal(err)
	} else if ok && nth-1 > cons.CachedInfo().AckFloor.Stream {
		if _, err := e.js.ResetConsumerToSequence(e.ctx, streams.InboxStream(p), cfg.Durable, nth); err != nil {
			e.t.Fatal(err)
		}
	}
	info, err := cons.Info(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return cons, info.AckFloor.Stream + 1
}

// A device that logged in for the first time has a consumer at the start
// of its window before its gateway writes its device_cursor row: the
// cleanup keeps the window as it was Margin ago, so neither entries that
// left the window by time since the login nor newer entries that pushed
// older ones out of the newest NewDeviceMax take what that device still has
// to receive (a purge would also move its consumer past them).
func TestCleanupKeepsANewDevicesStartBeforeItsRowIsWritten(t *testing.T) {
	e := newCleanupEnv(t)
	const window, margin, newest = 1200 * time.Millisecond, 2 * time.Second, 3
	byTime, byCount := e.uidIn(0, 1), e.uidIn(0, 2)
	// byTime: entries 400 ms apart; its new device logs in when the first
	// two are in the window, and the round comes after the first has left.
	e.publish(byTime, 1)
	time.Sleep(400 * time.Millisecond)
	e.publish(byTime, 1)
	time.Sleep(400 * time.Millisecond)
	e.publish(byTime, 1)
	time.Sleep(window - 600*time.Millisecond)
	// byCount: 5 entries; its new device starts at the newest 3.
	e.publish(byCount, 5)
	e.archive(0, e.lastSeq(0))
	c, _ := e.cleaner(CleanupOptions{Rate: 1000, Batch: 100, Margin: margin, NewDeviceWindow: window, NewDeviceMax: newest})
	if _, err := c.round(e.ctx); err != nil { // marks the archive as of now
		t.Fatal(err)
	}
	timeDev, timeStart := e.newDevice(byTime, "tablet", window, 1000)
	countDev, countStart := e.newDevice(byCount, "tablet", window, newest)
	if timeStart != e.seqs[byTime][1] || countStart != e.seqs[byCount][2] {
		t.Fatalf("new devices start at %d and %d; want %d (the window by time) and %d (the newest %d)",
			timeStart, countStart, e.seqs[byTime][1], e.seqs[byCount][2], newest)
	}
	// Their other devices confirm everything, and more arrives.
	e.publish(byCount, 3)
	e.archive(0, e.lastSeq(0))
	last := func(uid int64) uint64 { return e.seqs[uid][len(e.seqs[uid])-1] }
	e.confirm(byTime, map[string]uint64{"phone": last(byTime)})
	e.confirm(byCount, map[string]uint64{"phone": last(byCount)})
	time.Sleep(500 * time.Millisecond) // byTime's first entry left the window
	if _, err := c.round(e.ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		uid   int64
		cons  jetstream.Consumer
		start uint64
	}{{byTime, timeDev, timeStart}, {byCount, countDev, countStart}} {
		start := d.start
		info, err := d.cons.Info(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := info.AckFloor.Stream; got+1 != start {
			t.Errorf("uid %d: the new device's consumer starts at %d after the round, %d before", d.uid, got+1, start)
		}
		if got, want := e.inStream(d.uid), from(e.seqs[d.uid], start); !slices.Equal(from(got, start), want) {
			t.Errorf("uid %d: stream holds %v from the new device's start %d, want %v", d.uid, from(got, start), start, want)
		}
	}
}

// BenchmarkPurgeOneUser measures one early cleanup purge: a user's oldest
// 50 of 100 entries, in a partition of 200,000 entries of 2,000 users
// (interleaved, as traffic writes them), through the request the cleaner
// sends. Each holds the stream's lock for about its duration.
//
// Run: go test -run '^$' -bench PurgeOneUser -benchtime 2000x ./internal/archive/
func BenchmarkPurgeOneUser(b *testing.B) {
	ctx := context.Background()
	ns := testenv.StartNATS(b)
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Fatal(err)
	}
	l := streams.Layout{InboxPartitions: 1, SendPartitions: 1}
	if err := streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, streams.DefaultReplicas); err != nil {
		b.Fatal(err)
	}
	const users, per = 2000, 100
	seqOf := make([][]uint64, users) // filled from the acks
	var acks []jetstream.PubAckFuture
	for i := range users * per {
		uid := int64(i%users + 1)
		en := streams.Entry{MsgID: int64(i + 1), ConvID: 1, ConvSeq: int64(i + 1), SenderUID: 1, Kind: 1}
		body, _ := en.Marshal()
		f, err := js.PublishMsgAsync(en.Msg(0, uid, body, streams.MessageDedupeID(int64(i+1), uid)))
		if err != nil {
			b.Fatal(err)
		}
		acks = append(acks, f)
	}
	<-js.PublishAsyncComplete()
	for i, f := range acks {
		select {
		case a := <-f.Ok():
			seqOf[i%users] = append(seqOf[i%users], a.Sequence)
		case err := <-f.Err():
			b.Fatal(err)
		}
	}
	c := &Cleaner{log: testenv.Logger(b), nc: nc}
	if b.N > users {
		b.Fatalf("at most %d purges (one per user)", users)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n, err := c.purge(ctx, 0, int64(i+1), seqOf[i][per/2])
		if err != nil || n != per/2 {
			b.Fatalf("purge: %d, %v", n, err)
		}
	}
}
