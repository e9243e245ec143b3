package e2e

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// Early cleanup (docs/operations.md "Early cleanup"): the syncer purges a
// user's inbox subject below min(every device's confirmed cursor, the
// archive's mark, the new-device window). These tests run it every 100 ms
// against a real node and look at the streams with the admin connection.

// cleanupConfig is a node configuration whose early cleanup runs every
// 100 ms with the shortest margin (above the gateway's one-second cursor
// flush: a device's row may appear a second after its first login).
func cleanupConfig(t testing.TB) config.Config {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.CleanupEvery = 100 * time.Millisecond
	cfg.CleanupMargin = config.MinCleanupMargin
	cfg.CleanupRate = 1000
	return cfg
}

// checkFor calls fn every 50 ms until it returns nil, and fails the test
// with its last error after total.
func checkFor(t testing.TB, total time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(total)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", total, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// streamMsgIDs returns the msg_ids of uid's entries in its INBOX stream,
// in stream order, read with the admin connection.
func streamMsgIDs(t testing.TB, n *node.Node, uid int64) ([]int64, error) {
	t.Helper()
	// The cleanup may purge entries while they are read: then read again.
	entries, err := testenv.ReadInboxEntries(testnode.Admin(t, n), testnode.Layout(), uid, 5*time.Second)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, e := range entries {
		out = append(out, e.MsgID)
	}
	return out, nil
}

// streamHolds waits until uid's stream entries are exactly want.
func streamHolds(t testing.TB, n *node.Node, uid int64, want []int64, what string) {
	t.Helper()
	checkFor(t, 15*time.Second, func() error {
		got, err := streamMsgIDs(t, n, uid)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s: uid %d's stream holds %d entries %v, want %d %v", what, uid, len(got), got, len(want), want)
		}
		return nil
	})
}

// mirrored waits until uid/device's device_cursor row confirms at least the
// inbox entry of msg (a sequence of uid's partition).
func mirrored(t testing.TB, n *node.Node, uid int64, device string, seq uint64) {
	t.Helper()
	checkFor(t, 15*time.Second, func() error {
		got := count(t, n, `SELECT coalesce(max(ack_seq), 0)::int FROM device_cursor WHERE uid = $1 AND device = $2`, uid, device)
		if uint64(got) < seq {
			return fmt.Errorf("device %d/%s mirrored at %d, want %d", uid, device, got, seq)
		}
		return nil
	})
}

// noPulls fails if a message came from a conversation pull (the client's
// gap fill): the inbox itself must have delivered everything.
func noPulls(t testing.TB, who string, msgs []client.Message) {
	t.Helper()
	for _, m := range msgs {
		if m.Lane == "pull" || m.Late {
			t.Fatalf("%s: msg %d (conv_seq %d) came by %s (late %v): the inbox skipped it", who, m.MsgID, m.ConvSeq, m.Lane, m.Late)
		}
	}
}

// A new device of a user whose other device confirmed everything still
// gets its window after the cleanup removed the rest: by count (the newest
// --new-device-max) and by time (the last --new-device-window), the
// window's entries stay in the stream and the new device receives exactly
// them, in order, from the stream.
func TestEarlyCleanupNewDeviceStillGetsItsWindow(t *testing.T) {
	t.Run("newest max", func(t *testing.T) {
		cfg := cleanupConfig(t)
		cfg.NewDeviceWindow, cfg.NewDeviceMax = time.Hour, 5
		n := testnode.StartNode(t, cfg, config.RoleAllInOne)
		conv := createConv(t, n, false, 1, 2)
		a := connectDevice(t, n, 2, "phone", deviceOpts{})
		sent := sendN(t, n, 1, conv, 20, "m")
		got := a.waitFor(20, 20*time.Second)
		mirrored(t, n, 2, "phone", got[19].Seq)
		streamHolds(t, n, 2, sent[15:], "the newest 5 of 20 confirmed")
		c := connectDevice(t, n, 2, "tablet", deviceOpts{})
		msgs := c.waitFor(5, 10*time.Second)
		msgs = append(msgs[:0:0], c.quiet(300*time.Millisecond)...)
		checkOrderedOnce(t, msgs, sent[15:])
		noPulls(t, "new device", msgs)
	})
	t.Run("last window", func(t *testing.T) {
		const window = 3 * time.Second
		cfg := cleanupConfig(t)
		cfg.NewDeviceWindow = window // NewDeviceMax: no cap
		n := testnode.StartNode(t, cfg, config.RoleAllInOne)
		conv := createConv(t, n, false, 1, 2)
		a := connectDevice(t, n, 2, "phone", deviceOpts{})
		sendN(t, n, 1, conv, 10, "old")
		a.waitFor(10, 20*time.Second)
		time.Sleep(window + cfg.CleanupMargin + 200*time.Millisecond)
		recent := sendN(t, n, 1, conv, 5, "new")
		got := a.waitFor(15, 20*time.Second)
		mirrored(t, n, 2, "phone", got[14].Seq)
		streamHolds(t, n, 2, recent, "the window's 5 after 10 older ones, all confirmed")
		c := connectDevice(t, n, 2, "tablet", deviceOpts{})
		msgs := c.waitFor(5, 10*time.Second)
		msgs = append(msgs[:0:0], c.quiet(300*time.Millisecond)...)
		checkOrderedOnce(t, msgs, recent)
		noPulls(t, "new device", msgs)
	})
}

// A device that is behind holds the cleanup back at its cursor: entries its
// user's other device confirmed are removed only below it. When it comes
// back after its consumer was reaped (recreated from its device_cursor
// row), it catches up from its cursor across the archive and the stream,
// in order, nothing skipped, nothing pulled to fill a gap; once it
// confirmed, the rest goes too.
func TestEarlyCleanupDeviceBehindCatchesUpAcrossTheArchive(t *testing.T) {
	cfg := cleanupConfig(t)
	cfg.NewDeviceWindow, cfg.NewDeviceMax = time.Hour, 1
	cfg.TailScan = 10 // a backlog of more than 10 partition entries is read from the archive
	n := testnode.StartNode(t, cfg, config.RoleAllInOne)
	conv := createConv(t, n, false, 1, 2)
	a := connectDevice(t, n, 2, "phone", deviceOpts{})
	connectDevice(t, n, 2, "laptop", deviceOpts{}).close() // known, at cursor 0
	first := sendN(t, n, 1, conv, 40, "a")
	b := connectDevice(t, n, 2, "laptop", deviceOpts{stopAfter: 15})
	gotA := a.waitFor(40, 20*time.Second)
	gotB := b.waitFor(15, 20*time.Second)
	time.Sleep(200 * time.Millisecond) // let the stop take effect
	b.close()                          // confirms exactly the 15 it handled
	mirrored(t, n, 2, "phone", gotA[39].Seq)
	mirrored(t, n, 2, "laptop", gotB[14].Seq)
	// The cleanup keeps everything above the laptop's cursor.
	streamHolds(t, n, 2, first[15:], "the phone confirmed 40, the laptop 15")
	// --device-reap removes an unused consumer; the row stays.
	p := ids.Partition(2, cfg.Layout.InboxPartitions)
	js, err := jetstream.New(testnode.Admin(t, n))
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteConsumer(ctxT(t, 10*time.Second), streams.InboxStream(p), streams.DeviceConsumer(2, "laptop")); err != nil {
		t.Fatal(err)
	}
	more := sendN(t, n, 1, conv, 20, "b")
	a.waitFor(60, 20*time.Second)
	want := append(append([]int64(nil), first[15:]...), more...)
	streamHolds(t, n, 2, want, "the laptop still at 15")
	archivePages := metric(t, n, `inboxd_gateway_backfill_pages_total{source="archive"}`)

	back := connectDevice(t, n, 2, "laptop", deviceOpts{})
	msgs := back.waitFor(len(want), 20*time.Second)
	msgs = append(msgs[:0:0], back.quiet(300*time.Millisecond)...)
	checkOrderedOnce(t, msgs, want)
	noPulls(t, "the laptop", msgs)
	if metric(t, n, `inboxd_gateway_backfill_pages_total{source="archive"}`) == archivePages {
		t.Fatal("the laptop's catch-up read nothing from the archive")
	}
	mirrored(t, n, 2, "laptop", msgs[len(msgs)-1].Seq)
	streamHolds(t, n, 2, more[19:], "both devices confirmed everything: the newest 1 stays")
	if metric(t, n, "inboxd_cleanup_entries_removed_total") < 59 {
		t.Fatalf("inboxd_cleanup_entries_removed_total %v, want at least uid 2's 59", metric(t, n, "inboxd_cleanup_entries_removed_total"))
	}
}

// appDevice is an application that keeps what it stored across its client
// sessions and dedupes by msg_id, as a real one with local storage does:
// it can go offline (its client closed) and come back with a new client.
type appDevice struct {
	t      testing.TB
	n      *node.Node
	uid    int64
	name   string
	mu     sync.Mutex
	c      *client.Client
	seen   map[int64]bool
	got    []client.Message
	pulled int
}

func newAppDevice(t testing.TB, n *node.Node, uid int64, name string) *appDevice {
	return &appDevice{t: t, n: n, uid: uid, name: name, seen: map[int64]bool{}}
}

func (d *appDevice) handle(m client.Message) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if m.Lane == "pull" || m.Late {
		d.pulled++
	}
	if !d.seen[m.MsgID] {
		d.seen[m.MsgID] = true
		d.got = append(d.got, m)
	}
	return nil
}

func (d *appDevice) connect() {
	d.t.Helper()
	c, err := client.Dial(ctxT(d.t, 20*time.Second), client.Options{URL: d.n.Gateway.WSURL(), Token: testenv.Token(d.t, d.uid, d.name),
		Handler: d.handle, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond})
	if err != nil {
		d.t.Errorf("connect %d/%s: %v", d.uid, d.name, err)
		return
	}
	d.mu.Lock()
	d.c = c
	d.mu.Unlock()
}

func (d *appDevice) disconnect() {
	d.mu.Lock()
	c := d.c
	d.c = nil
	d.mu.Unlock()
	if c != nil {
		c.Close()
	}
}

func (d *appDevice) connected() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.c != nil
}

func (d *appDevice) messages() ([]client.Message, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]client.Message(nil), d.got...), d.pulled
}

// Cleanup under load changes nothing of what devices receive: while a
// sender writes 1000 messages to a group in bursts and the cleanup purges
// every 100 ms, devices that stay, that go and come back every 150 ms, and
// one that is away throughout each end with every message once, in order,
// all from their inboxes (no gap filled by a conversation pull); and the
// cleanup did remove entries during the sends.
func TestEarlyCleanupUnderLoadChangesNothingDevicesReceive(t *testing.T) {
	cfg := cleanupConfig(t)
	cfg.NewDeviceWindow, cfg.NewDeviceMax = time.Hour, 10
	n := testnode.StartNode(t, cfg, config.RoleAllInOne)
	conv := createConv(t, n, true, 1, 2, 3, 4, 5)
	devs := []*appDevice{
		newAppDevice(t, n, 2, "steady"), newAppDevice(t, n, 2, "flap"),
		newAppDevice(t, n, 3, "steady"), newAppDevice(t, n, 3, "away"),
		newAppDevice(t, n, 4, "steady"),
		newAppDevice(t, n, 5, "flap"),
	}
	for _, d := range devs {
		d.connect()
		t.Cleanup(d.disconnect)
	}
	checkFor(t, 10*time.Second, func() error {
		if got := count(t, n, `SELECT count(*)::int FROM device_cursor WHERE uid BETWEEN 2 AND 5`); got != len(devs) {
			return fmt.Errorf("%d device rows, want %d", got, len(devs))
		}
		return nil
	})
	devs[3].disconnect() // 3/away is away during all the sends

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, d := range devs {
		if d.name != "flap" {
			continue
		}
		wg.Add(1)
		go func(d *appDevice) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(150 * time.Millisecond):
				}
				d.disconnect()
				time.Sleep(150 * time.Millisecond)
				d.connect()
			}
		}(d)
	}
	var sent []int64
	for burst := range 20 { // about 5 s: the cleanup's margin (2 s) passes during the sends
		sent = append(sent, sendN(t, n, 1, conv, 50, fmt.Sprintf("b%d", burst))...)
		time.Sleep(200 * time.Millisecond)
	}
	removedDuringSends := metric(t, n, "inboxd_cleanup_entries_removed_total")
	close(stop)
	wg.Wait()
	for _, d := range devs {
		if !d.connected() {
			d.connect()
		}
	}
	for _, d := range devs {
		checkFor(t, 60*time.Second, func() error {
			if got, _ := d.messages(); len(got) < len(sent) {
				return fmt.Errorf("%d/%s holds %d of %d messages", d.uid, d.name, len(got), len(sent))
			}
			return nil
		})
		time.Sleep(200 * time.Millisecond)
		got, pulled := d.messages()
		checkOrderedOnce(t, got, sent)
		if pulled > 0 {
			t.Fatalf("%d/%s: %d messages came from conversation pulls or late: the inbox skipped them", d.uid, d.name, pulled)
		}
	}
	if removedDuringSends == 0 {
		t.Fatal("the cleanup removed nothing while the sends ran")
	}
	t.Logf("the cleanup removed %v entries during the sends, %v in all", removedDuringSends, metric(t, n, "inboxd_cleanup_entries_removed_total"))
}
