package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// Covering reads (gateway/pages.go, tailPage): a device that is up to date
// receives new messages on the live lane, and its cursor moves over them
// by a tail read that takes no page slot, no backfill budget and no
// bodies. In a login storm these reads would otherwise queue with the
// storm's catch-up pages (issue 11).

// pageCounts reads the gateway's backfill pages by source.
func pageCounts(t *testing.T, n *node.Node) (tail, archive, cover float64) {
	t.Helper()
	return metric(t, n, `inboxd_gateway_backfill_pages_total{source="tail"}`),
		metric(t, n, `inboxd_gateway_backfill_pages_total{source="archive"}`),
		metric(t, n, `inboxd_gateway_backfill_pages_total{source="cover"}`)
}

// inOrderOnce fails unless msgs are exactly want (msg_ids), once each, in
// order, each with its conv_seq above the one before.
func inOrderOnce(t *testing.T, who string, msgs []client.Message, want []int64) {
	t.Helper()
	if len(msgs) != len(want) {
		t.Fatalf("%s: %d messages, want %d", who, len(msgs), len(want))
	}
	for i, m := range msgs {
		if m.MsgID != want[i] {
			t.Fatalf("%s: message %d is msg %d, want %d (every message once, in order)", who, i, m.MsgID, want[i])
		}
		if i > 0 && m.ConvSeq <= msgs[i-1].ConvSeq {
			t.Fatalf("%s: message %d has conv_seq %d after %d", who, i, m.ConvSeq, msgs[i-1].ConvSeq)
		}
	}
}

// lastSeq is the inbox seq of uid's newest entry.
func lastSeq(t *testing.T, n *node.Node, uid int64) uint64 {
	t.Helper()
	es := testenv.InboxEntries(t, testnode.Admin(t, n), testnode.Layout(), uid)
	if len(es) == 0 {
		t.Fatalf("uid %d: empty inbox", uid)
	}
	return es[len(es)-1].Seq
}

// Connected, up-to-date devices receive N live messages: every one once,
// in order, with its body; their cursors move over all of them; and the
// gateway read no backfill page with bodies for that (no tail or archive
// page: covering reads only). Without covering reads each confirmation
// costs a tail page (a page slot, budget, a Postgres round trip).
func TestLiveConfirmationsCoveredWithoutBackfillPages(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, true, 1, 2, 3)
	devs := map[int64]*device{
		2: connectDevice(t, n, 2, "desk", deviceOpts{}),
		3: connectDevice(t, n, 3, "desk", deviceOpts{transport: "tcp"}),
	}
	// The sender stays connected too (sendN's logins of new devices
	// would read backfill pages of their own).
	sender := connectDevice(t, n, 1, "sender", deviceOpts{})
	warm, err := sender.c.Send(ctxT(t, 10*time.Second), conv, "warm", "warm")
	if err != nil {
		t.Fatal(err)
	}
	for uid, d := range devs {
		waitAll(t, d, []int64{warm.MsgID}, 30*time.Second, "the first message")
		mirrored(t, n, uid, "desk", lastSeq(t, n, uid))
	}
	tail0, archive0, cover0 := pageCounts(t, n)

	const N = 30
	ids := []int64{warm.MsgID}
	for i := 0; i < N; i++ { // one at a time: each its own live batch and confirmation
		r, err := sender.c.Send(ctxT(t, 10*time.Second), conv, fmt.Sprintf("live-%d", i), fmt.Sprintf("live message %d", i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MsgID)
		for _, d := range devs {
			d.waitFor(len(ids), 30*time.Second)
		}
	}
	for uid, d := range devs {
		mirrored(t, n, uid, "desk", lastSeq(t, n, uid)) // the cursor moved over all of them
		msgs := d.messages()
		inOrderOnce(t, fmt.Sprintf("uid %d", uid), msgs, ids)
		for _, m := range msgs {
			if m.Lane != "live" || m.Text == "" {
				t.Fatalf("uid %d: msg %d came by %s with text %q, want live with its body", uid, m.MsgID, m.Lane, m.Text)
			}
		}
	}
	tail, archive, cover := pageCounts(t, n)
	t.Logf("pages: tail %v, archive %v, cover %v (before: %v, %v, %v)", tail, archive, cover, tail0, archive0, cover0)
	// A confirmation that races its own live entry (the consumer delivers
	// the entry before the live lane has sent it) is a normal page, by the
	// race guard's design: a clean-clone CI run saw one in 62. Without
	// covering reads every confirmation is one (93 tail pages here).
	if tail-tail0 > 3 || archive != archive0 {
		t.Fatalf("backfill pages with bodies for live messages: tail %v → %v, archive %v → %v (want at most 3 new of %d confirmations: covering reads)", tail0, tail, archive0, archive, len(ids)*len(devs))
	}
	if cover <= cover0 {
		t.Fatalf("no covering read (cover pages %v → %v), yet the cursors moved", cover0, cover)
	}
}

// The race guard of covering reads: an entry in the device's inbox that
// the live lane did not send (here one written without a live
// announcement, as a live entry dropped or deferred would be) is found by
// the covering read after the next live message and handed over as a
// normal page, with its body: nothing lost, nothing twice.
func TestCoveringReadFallsBackForAnEntryNotSentLive(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	other := createConv(t, n, false, 1, 3)
	d := connectDevice(t, n, 2, "desk", deviceOpts{})
	first := sendN(t, n, 1, conv, 3, "first")
	waitAll(t, d, first, 30*time.Second, "first live messages")
	mirrored(t, n, 2, "desk", lastSeq(t, n, 2))

	// A copy of a message of another conversation (its body is stored)
	// written straight into uid 2's inbox: no live announcement.
	hidden := sendN(t, n, 1, other, 1, "hidden")
	admin := testnode.Admin(t, n)
	writeUnannounced(t, admin, 3, 2, hidden[0])
	fallbacks0 := metric(t, n, "inboxd_gateway_cover_fallbacks_total")

	live := sendN(t, n, 1, conv, 2, "after") // live; its confirmation reads the tail
	waitAll(t, d, append(append([]int64{}, live...), hidden...), 30*time.Second, "the live messages and the entry not sent live")
	mirrored(t, n, 2, "desk", lastSeq(t, n, 2))

	var ofConv []client.Message
	var got *client.Message
	for _, m := range d.messages() {
		switch m.ConvID {
		case conv:
			ofConv = append(ofConv, m)
		case other:
			if got != nil {
				t.Fatalf("msg %d twice", m.MsgID)
			}
			got = &m
		}
	}
	inOrderOnce(t, "conv", ofConv, append(append([]int64{}, first...), live...))
	if got.Lane != "backfill" || got.Text != "hidden message 0" {
		t.Fatalf("the entry not sent live came by %s with text %q, want backfill with its body", got.Lane, got.Text)
	}
	if f := metric(t, n, "inboxd_gateway_cover_fallbacks_total"); f <= fallbacks0 {
		t.Fatalf("cover fallbacks %v → %v: the covering read did not meet the entry", fallbacks0, f)
	}
}
