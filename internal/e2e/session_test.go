package e2e

import (
	"net"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// rawHello logs in a raw connection as uid's device with the given kind.
func (c *rawTCP) rawHello(uid int64, device, kind string) *pb.Welcome {
	c.t.Helper()
	c.write(&pb.Hello{Token: testenv.Token(c.t, uid, device), DeviceKind: kind})
	w, ok := c.read().(*pb.Welcome)
	if !ok {
		c.t.Fatal("no welcome")
	}
	return w
}

// nextBatch returns the next Batch frame (other frames are skipped), or
// nil when the connection closed.
func (c *rawTCP) nextBatch() *pb.Batch {
	c.t.Helper()
	for {
		m := c.read()
		if m == nil {
			return nil
		}
		if b, ok := m.(*pb.Batch); ok {
			return b
		}
	}
}

// The newest page of an offline-too-long device is marked newest on the
// wire (it is ahead of conv_seq order); the drain after it is not.
func TestNewestPageMarkedNewest(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.OfflineThreshold = 50
	n := testnode.StartNode(t, cfg, config.RoleEmbeddedNATS|config.RoleGateway|config.RoleFanout|config.RoleSyncer)
	conv := createConv(t, n, false, 1, 2)
	const total = 300
	sendN(t, n, 1, conv, total, "nw")
	waitArchived(t, n, 2*total)

	c := dialRaw(t, n.Gateway.TCPAddr())
	w := c.rawHello(2, "raw-phone", "mobile") // pages of 100
	if !w.GetOfflineTooLong() {
		t.Fatalf("welcome with %d pending, threshold 50: not offline too long", w.GetPending())
	}
	got := map[int64]bool{}
	var newest, drained int
	first := true
	for len(got) < total {
		b := c.nextBatch()
		if b == nil {
			t.Fatalf("connection closed after %d of %d messages", len(got), total)
		}
		if len(b.GetMessages()) == 0 {
			continue
		}
		if first != b.GetNewest() {
			t.Fatalf("batch %d (%s, %d messages, first %v): newest=%v, want %v",
				b.GetBatchId(), b.GetLane(), len(b.GetMessages()), first, b.GetNewest(), first)
		}
		if first {
			newest = len(b.GetMessages())
		} else {
			drained += len(b.GetMessages())
		}
		first = false
		for _, m := range b.GetMessages() {
			got[m.GetMsgId()] = true
		}
		c.write(&pb.Ack{BatchIds: []uint64{b.GetBatchId()}})
	}
	if newest != 100 || drained != total-100 {
		t.Fatalf("newest page %d messages, drain %d; want 100 and %d", newest, drained, total-100)
	}
}

// --tail-scan decides the source of a catch-up: a device whose partition
// stretch from its cursor to the head is below it is served by its
// consumer (the tail), one above it from the Postgres archive, even though
// the archive holds both ranges.
func TestTailScanChoosesTheSource(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.TailScan = 500
	n := testnode.StartNode(t, cfg, config.RoleEmbeddedNATS|config.RoleGateway|config.RoleFanout|config.RoleSyncer)
	near, far := int64(2), int64(3)
	nearConv := createConv(t, n, false, 10, near)
	farConv := createConv(t, n, false, 11, far)
	// Both devices log in once (they have a cursor), then go offline.
	for _, uid := range []int64{near, far} {
		connectDevice(t, n, uid, "phone", deviceOpts{}).close()
	}
	pages := func() (archive, tail float64) {
		return metric(t, n, `inboxd_gateway_backfill_pages_total{source="archive"}`),
			metric(t, n, `inboxd_gateway_backfill_pages_total{source="tail"}`)
	}

	want := sendN(t, n, 10, nearConv, 50, "near")
	waitArchived(t, n, 2*50)
	time.Sleep(time.Second) // the gateway's partition info (archive mark) is refreshed every 250 ms
	a0, t0 := pages()
	d := connectDevice(t, n, near, "phone", deviceOpts{})
	d.waitFor(50, 30*time.Second)
	checkOrderedOnce(t, d.quiet(300*time.Millisecond), want)
	a1, t1 := pages()
	if a1 != a0 || t1 == t0 {
		t.Fatalf("50 entries behind (tail scan 500): %v archive and %v tail pages, want 0 and some", a1-a0, t1-t0)
	}

	want = sendN(t, n, 11, farConv, 1000, "far")
	waitArchived(t, n, 2*50+2*1000)
	time.Sleep(time.Second)
	d = connectDevice(t, n, far, "phone", deviceOpts{})
	d.waitFor(1000, 30*time.Second)
	checkOrderedOnce(t, d.quiet(300*time.Millisecond), want)
	if a2, _ := pages(); a2 == a1 {
		t.Fatal("1,000 entries behind (tail scan 500): no page from the archive")
	}
}

// batchesFor reads Batch frames for d, pinging every 250 ms so that the
// connection stays alive (heartbeat-aware servers close silent ones), and
// stops early once done says so.
func (c *rawTCP) batchesFor(d time.Duration, done func(*pb.Batch) bool) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		_ = c.nc.SetReadDeadline(time.Now().Add(250 * time.Millisecond))
		f, err := wire.ReadTCPFrame(c.r, nil, 1<<20)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				c.write(&pb.Ping{})
				continue
			}
			c.t.Fatalf("read: %v", err)
		}
		_, m, err := wire.Decode(f)
		if err != nil {
			c.t.Fatal(err)
		}
		if b, ok := m.(*pb.Batch); ok && done(b) {
			return
		}
	}
}

// A connected device that stops confirming (it pings, so it is alive) does
// not hold its entries for good: after the ack timeout (3 heartbeats) the
// session takes them back and hands them over again from the cursor, and
// the cursor moves once the repeat is confirmed.
func TestAckTimeoutRedeliversUnconfirmed(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.Heartbeat = time.Second // ack timeout 3 s
	n := testnode.StartNode(t, cfg, config.RoleEmbeddedNATS|config.RoleGateway|config.RoleFanout|config.RoleSyncer)
	conv := createConv(t, n, false, 1, 2)
	backlog := sendN(t, n, 1, conv, 30, "at")

	c := dialRaw(t, n.Gateway.TCPAddr())
	c.rawHello(2, "slow-phone", "mobile")
	seen := map[int64]int{} // msg_id → times handed over
	var lastSeq uint64
	handedOver := func(b *pb.Batch) {
		for _, m := range b.GetMessages() {
			seen[m.GetMsgId()]++
			lastSeq = max(lastSeq, m.GetSeq())
		}
	}
	// The backlog, not confirmed.
	c.batchesFor(10*time.Second, func(b *pb.Batch) bool {
		handedOver(b)
		return len(seen) == len(backlog)
	})
	if len(seen) != len(backlog) {
		t.Fatalf("got %d of %d backlog messages", len(seen), len(backlog))
	}
	// A live one, not confirmed either.
	live := sendN(t, n, 1, conv, 1, "at-live")[0]
	c.batchesFor(10*time.Second, func(b *pb.Batch) bool {
		handedOver(b)
		return seen[live] == 1
	})
	if seen[live] != 1 {
		t.Fatal("the live message did not come")
	}
	// Still silent about them, but alive: they come again.
	var again []uint64
	c.batchesFor(15*time.Second, func(b *pb.Batch) bool {
		handedOver(b)
		if len(b.GetMessages()) > 0 {
			again = append(again, b.GetBatchId())
		}
		for _, id := range append(backlog, live) {
			if seen[id] < 2 {
				return false
			}
		}
		return true
	})
	for _, id := range append(backlog, live) {
		if seen[id] < 2 {
			t.Fatalf("message %d handed over %d times in 15 s without confirmation (ack timeout 3 s): not taken back", id, seen[id])
		}
	}
	if metric(t, n, "inboxd_gateway_ack_timeouts_total") < 1 {
		t.Fatal("ack timeout not counted")
	}
	// Confirming the repeat moves the cursor over everything.
	c.write(&pb.Ack{BatchIds: again})
	deadline := time.Now().Add(10 * time.Second)
	var cursor uint64
	for time.Now().Before(deadline) {
		if ss := n.Gateway.Sessions(2); len(ss) == 1 {
			if cursor = ss[0].Cursor; cursor >= lastSeq {
				return
			}
		}
		c.write(&pb.Ping{})
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("cursor %d after confirming the repeat, want %d", cursor, lastSeq)
}
