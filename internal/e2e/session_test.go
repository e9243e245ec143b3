package e2e

import (
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
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
