package e2e

import (
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

func TestOfflineReceiverGetsEverythingOnceInOrder(t *testing.T) {
	for _, tr := range []string{"ws", "tcp"} {
		t.Run(tr, func(t *testing.T) {
			n := testnode.AllInOne(t)
			conv := createConv(t, n, false, 1, 2)
			ids := sendN(t, n, 1, conv, 1000, "off")
			d := connectDevice(t, n, 2, "phone", deviceOpts{transport: tr})
			got := d.waitFor(1000, 60*time.Second)
			checkOrderedOnce(t, d.quiet(300*time.Millisecond), ids)
			for i, m := range got {
				if m.MsgID != ids[i] {
					t.Fatalf("message %d is %d, want %d (send order)", i, m.MsgID, ids[i])
				}
			}
			d.close()
			// A second connect gets nothing old.
			d2 := connectDevice(t, n, 2, "phone", deviceOpts{transport: tr})
			if got := d2.quiet(time.Second); len(got) != 0 {
				t.Fatalf("second connect got %d old messages (first seq %d)", len(got), got[0].Seq)
			}
		})
	}
}

// The device stops after part of its backlog (and confirms only what it
// handled); the next login continues right after the confirmed messages.
func TestDisconnectMidBackfillContinuesAtConfirmedCursor(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	ids := sendN(t, n, 1, conv, 2000, "mid")

	d1 := connectDevice(t, n, 2, "laptop", deviceOpts{stopAfter: 700})
	first := d1.waitFor(700, 60*time.Second)
	time.Sleep(200 * time.Millisecond) // let the stop take effect
	d1.close()                         // confirms exactly the 700 it handled
	if len(d1.messages()) != 700 {
		t.Fatalf("handler took %d, want 700", len(d1.messages()))
	}

	d2 := connectDevice(t, n, 2, "laptop", deviceOpts{})
	if w := d2.c.Welcome(); w.Cursor != first[699].Seq {
		t.Fatalf("cursor after stopping at message 700 is %d, want its seq %d", w.Cursor, first[699].Seq)
	}
	rest := d2.waitFor(1300, 60*time.Second)
	checkOrderedOnce(t, append(first, d2.quiet(300*time.Millisecond)...), ids)
	if rest[0].MsgID != ids[700] {
		t.Fatalf("second login starts at %d, want %d (message 701)", rest[0].MsgID, ids[700])
	}
}

// A device that logs in again the moment its connection closed is welcomed
// at the cursor it confirmed last, not one confirmation behind. Two races
// stood in the way, one per subtest:
//   - tail: the gateway had not read the closed connection's last ack when
//     the new login replaced it. A replaced connection now reads what its
//     client sent already before it closes (Conn.linger).
//   - archive: the pages came from the archive, so the confirmations move
//     the consumer only when the closing session saves its final cursor,
//     after it left the router; the new login now waits for that save
//     (router.leave) as it waits for a session it replaces.
//
// Forty close-and-redial rounds each, confirming 25 more messages a round;
// any stale cursor fails.
func TestReloginRightAfterCloseStartsAtFinalCursor(t *testing.T) {
	const rounds, step = 40, 25
	for _, source := range []string{"tail", "archive"} {
		t.Run(source, func(t *testing.T) {
			cfg := testnode.Config(t, testenv.Database(t))
			if source == "archive" {
				cfg.TailScan = 100 // a cursor further back reads the archive
			}
			n := testnode.StartNode(t, cfg, config.RoleEmbeddedNATS|config.RoleGateway|config.RoleFanout|config.RoleSyncer)
			conv := createConv(t, n, false, 1, 2)
			ids := sendN(t, n, 1, conv, rounds*step+200, "relogin")
			if source == "archive" {
				waitArchived(t, n, 2*len(ids))
			}
			var all []client.Message
			for i := range rounds {
				d := connectDevice(t, n, 2, "phone", deviceOpts{stopAfter: step})
				if i > 0 {
					if got, want := d.c.Welcome().Cursor, all[len(all)-1].Seq; got != want {
						t.Fatalf("round %d: welcomed at cursor %d, want %d (the last seq confirmed before the close)", i, got, want)
					}
				}
				all = append(all, d.waitFor(step, 30*time.Second)...)
				// The handler's stop takes effect before the close confirms the step.
				time.Sleep(50 * time.Millisecond)
				d.close()
			}
			checkOrderedOnce(t, all, ids[:len(all)])
			if source == "archive" && metric(t, n, `inboxd_gateway_backfill_pages_total{source="archive"}`) < rounds {
				t.Fatalf("fewer than %d archive pages: the subtest did not read the archive", rounds)
			}
		})
	}
}

// A device that crashed before storing (no acks) gets the same messages
// again at once on its next login, not after an ack timeout.
func TestUnconfirmedMessagesComeBackImmediately(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	ids := sendN(t, n, 1, conv, 300, "unc")
	d1 := connectDevice(t, n, 2, "tablet", deviceOpts{noAck: true})
	d1.waitFor(300, 30*time.Second)
	d1.close()

	start := time.Now()
	d2 := connectDevice(t, n, 2, "tablet", deviceOpts{})
	d2.waitFor(300, 30*time.Second)
	checkOrderedOnce(t, d2.quiet(300*time.Millisecond), ids)
	// The consumer's ack_wait is 2 minutes: getting them at all well before
	// that shows the reset on reconnect worked.
	if el := time.Since(start); el > 60*time.Second {
		t.Fatalf("redelivered only after %s", el)
	}
}

// Each device of a user has its own cursor.
func TestTwoDevicesReceiveEverythingIndependently(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, true, 1, 2, 3)
	ids := sendN(t, n, 1, conv, 200, "two")
	phone := connectDevice(t, n, 2, "phone", deviceOpts{kind: "mobile"})
	phone.waitFor(200, 30*time.Second)
	more := sendN(t, n, 3, conv, 100, "two-b")
	desk := connectDevice(t, n, 2, "desktop", deviceOpts{transport: "tcp"})
	all := append(append([]int64{}, ids...), more...)
	desk.waitFor(300, 30*time.Second)
	phone.waitFor(300, 30*time.Second)
	checkOrderedOnce(t, phone.quiet(300*time.Millisecond), all)
	checkOrderedOnce(t, desk.quiet(300*time.Millisecond), all)
}

// A device far behind (its cursor more than TailScan entries back) is served
// from the Postgres archive first, then from the consumer's tail, with live
// messages arriving meanwhile: everything once, in order.
func TestCatchUpFromArchiveThenTail(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.TailScan = 100
	n := testnode.StartNode(t, cfg, config.RoleEmbeddedNATS|config.RoleGateway|config.RoleFanout|config.RoleSyncer)
	conv := createConv(t, n, false, 1, 2)
	other := createConv(t, n, true, 1, 3, 4) // traffic uid 2 does not see
	ids := sendN(t, n, 1, conv, 1500, "arch")
	sendN(t, n, 1, other, 500, "noise")
	waitArchived(t, n, 1500*2+500*3) // every entry of both conversations

	d := connectDevice(t, n, 2, "old-laptop", deviceOpts{kind: "mobile"})
	d.waitFor(200, 30*time.Second)
	late := sendN(t, n, 1, conv, 100, "late") // while the catch-up runs
	all := append(append([]int64{}, ids...), late...)
	d.waitFor(len(all), 60*time.Second)
	checkOrderedOnce(t, d.quiet(300*time.Millisecond), all)
	if metric(t, n, `inboxd_gateway_backfill_pages_total{source="archive"}`) < 1 {
		t.Fatal("no page came from the archive")
	}
}

// Regression (found by the chaos suite): a restarted app (a new client, so
// it knows nothing of its conversations) holds a live message whose
// conversation it has not seen yet until the backfill is done, while the
// backfill, passing that message's position, must not wait for its
// confirmation before switching from the archive to the consumer's tail.
func TestLiveMessageHeldByRestartedAppDoesNotStallBackfill(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.TailScan = 100
	n := testnode.StartNode(t, cfg, config.RoleEmbeddedNATS|config.RoleGateway|config.RoleFanout|config.RoleSyncer)
	quiet := createConv(t, n, false, 1, 2)
	busy := createConv(t, n, false, 3, 2)
	old := sendN(t, n, 1, quiet, 50, "old")
	d := connectDevice(t, n, 2, "phone", deviceOpts{})
	d.waitFor(50, 20*time.Second)
	d.quiet(300 * time.Millisecond)
	d.close() // everything of the quiet conversation confirmed

	backlog := sendN(t, n, 3, busy, 3000, "backlog")
	waitArchived(t, n, 2*50+2*3000)
	d2 := connectDevice(t, n, 2, "phone", deviceOpts{kind: "mobile"}) // a new client: no history
	d2.waitFor(1, 20*time.Second)
	live := sendN(t, n, 1, quiet, 1, "live") // conv_seq 51: a gap for the new client
	// Traffic of others in uid 2's partition after it, so that the live
	// entry ends up far (> TailScan) behind the head: the backfill reaches
	// it from the archive.
	var a, b int64
	for u := int64(100); b == 0; u++ {
		if ids.Partition(u, cfg.Layout.InboxPartitions) == ids.Partition(2, cfg.Layout.InboxPartitions) {
			if a == 0 {
				a = u
			} else {
				b = u
			}
		}
	}
	sendN(t, n, a, createConv(t, n, false, a, b), 300, "others")
	got := d2.waitFor(3001, 60*time.Second)
	checkOrderedOnce(t, got, append(append([]int64{}, backlog...), live...))
	_ = old
}
