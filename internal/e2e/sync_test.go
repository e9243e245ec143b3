package e2e

import (
	"errors"
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// The login summary agrees with a brute-force count over a random workload
// of users, conversations, sends and reads.
func TestSummaryMatchesBruteForce(t *testing.T) {
	n := testnode.AllInOne(t)
	rng := rand.New(rand.NewPCG(7, 11))
	users := []int64{1, 2, 3, 4, 5}
	type conv struct {
		id      int64
		members []int64
		senders []int64 // sender of each conv_seq (index conv_seq-1)
	}
	var convs []*conv
	for i := 0; i < 6; i++ {
		var members []int64
		if i < 3 {
			a, b := users[rng.IntN(5)], users[rng.IntN(5)]
			for b == a {
				b = users[rng.IntN(5)]
			}
			members = []int64{a, b}
		} else {
			for _, u := range users {
				if rng.IntN(3) > 0 {
					members = append(members, u)
				}
			}
			if len(members) < 2 {
				members = users[:3]
			}
		}
		convs = append(convs, &conv{id: createConv(t, n, i >= 3, members...), members: members})
	}
	clients := map[int64]*client.Client{}
	for _, u := range users {
		clients[u] = connectDevice(t, n, u, "d1", deviceOpts{}).c
	}
	read := map[[2]int64]int64{} // (uid, conv) → explicit read position
	ctx := ctxT(t, 120*time.Second)
	for step := 0; step < 400; step++ {
		c := convs[rng.IntN(len(convs))]
		u := c.members[rng.IntN(len(c.members))]
		if rng.IntN(5) == 0 && len(c.senders) > 0 {
			upTo := int64(rng.IntN(len(c.senders)) + 1)
			got, err := clients[u].Read(ctx, c.id, upTo)
			if err != nil {
				t.Fatal(err)
			}
			k := [2]int64{u, c.id}
			read[k] = max(read[k], upTo)
			if got < read[k] {
				t.Fatalf("read position %d after reading up to %d", got, read[k])
			}
			continue
		}
		r, err := clients[u].Send(ctx, c.id, "s"+strconv.Itoa(step), "step "+strconv.Itoa(step))
		if err != nil {
			t.Fatal(err)
		}
		if r.ConvSeq != int64(len(c.senders)+1) {
			t.Fatalf("conv_seq %d, want %d", r.ConvSeq, len(c.senders)+1)
		}
		c.senders = append(c.senders, u)
	}
	for _, u := range users {
		want := map[int64]int64{}
		for _, c := range convs {
			member := false
			for _, m := range c.members {
				member = member || m == u
			}
			if !member {
				continue
			}
			r := read[[2]int64{u, c.id}]
			for seq, s := range c.senders {
				if s == u {
					r = max(r, int64(seq+1)) // sending reads the conversation up to there
				}
			}
			unread := int64(0)
			for seq := range c.senders {
				if int64(seq+1) > r {
					unread++
				}
			}
			if unread > 0 {
				want[c.id] = unread
			}
		}
		s, err := clients[u].Summary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := map[int64]int64{}
		for _, cs := range s.GetConvs() {
			got[cs.GetConvId()] = cs.GetUnread()
			for _, c := range convs {
				if c.id == cs.GetConvId() && (cs.GetLastSeq() != int64(len(c.senders)) || cs.GetLastSenderUid() != c.senders[len(c.senders)-1]) {
					t.Fatalf("uid %d conv %d: last message %d by %d, want %d by %d", u, c.id,
						cs.GetLastSeq(), cs.GetLastSenderUid(), len(c.senders), c.senders[len(c.senders)-1])
				}
			}
		}
		if len(got) != len(want) {
			t.Fatalf("uid %d: summary %v, brute force %v", u, got, want)
		}
		for c, w := range want {
			if got[c] != w {
				t.Fatalf("uid %d conv %d: unread %d, brute force %d", u, c, got[c], w)
			}
		}
	}
}

func TestConversationPullPagesBothWays(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, true, 1, 2)
	sendN(t, n, 1, conv, 1000, "pull")
	c := connectDevice(t, n, 2, "d", deviceOpts{}).c
	ctx := ctxT(t, 60*time.Second)

	var fwd []int64
	after := int64(0)
	for {
		msgs, more, err := c.Pull(ctx, conv, after, 0, 50)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			fwd = append(fwd, m.ConvSeq)
			after = m.ConvSeq
		}
		if !more {
			break
		}
	}
	var back []int64
	before := int64(0)
	for {
		msgs, more, err := c.Pull(ctx, conv, 0, before, 50)
		if before == 0 {
			msgs, more, err = c.Pull(ctx, conv, 0, 1<<40, 50)
		}
		if err != nil {
			t.Fatal(err)
		}
		back = append(append([]int64{}, seqsOf(msgs)...), back...)
		if len(msgs) > 0 {
			before = msgs[0].ConvSeq
		}
		if !more {
			break
		}
	}
	for name, got := range map[string][]int64{"forward": fwd, "backward": back} {
		if len(got) != 1000 {
			t.Fatalf("%s: %d messages", name, len(got))
		}
		for i, s := range got {
			if s != int64(i+1) {
				t.Fatalf("%s: position %d holds conv_seq %d", name, i, s)
			}
		}
	}

	// A non-member is refused.
	o := connectDevice(t, n, 9, "d", deviceOpts{}).c
	var we *wire.Error
	if _, _, err := o.Pull(ctx, conv, 0, 0, 10); !errors.As(err, &we) || we.Code != pb.ErrorCode_NOT_MEMBER {
		t.Fatalf("non-member pull: %v", err)
	}
	// A late joiner sees what was sent after it joined, not before.
	if _, err := (&admin.Client{NC: testnode.Admin(t, n)}).AddMembers(ctx, admin.MembersRequest{ConvID: conv, Members: []int64{7}}); err != nil {
		t.Fatal(err)
	}
	sendN(t, n, 1, conv, 5, "after-join")
	late := connectDevice(t, n, 7, "d", deviceOpts{}).c
	msgs, _, err := late.Pull(ctx, conv, 0, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 5 || msgs[0].ConvSeq != 1001 {
		t.Fatalf("late joiner pulled %v", seqsOf(msgs))
	}
	if msgs, _, _ := late.Pull(ctx, conv, 0, 1001, 50); len(msgs) != 0 {
		t.Fatalf("late joiner pulled history from before it joined: %v", seqsOf(msgs))
	}
}

func seqsOf(msgs []client.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.ConvSeq
	}
	return out
}

func TestPullsAreRateLimitedPerUser(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.PullRate = 2
	n := testnode.StartNode(t, cfg, config.RoleEmbeddedNATS|config.RoleGateway|config.RoleFanout|config.RoleSyncer)
	conv := createConv(t, n, false, 1, 2)
	c := connectDevice(t, n, 2, "d", deviceOpts{}).c
	ctx := ctxT(t, 20*time.Second)
	var limited *wire.Error
	for i := 0; i < 5 && limited == nil; i++ {
		_, _, err := c.Pull(ctx, conv, 0, 0, 10)
		var we *wire.Error
		if errors.As(err, &we) && we.Code == pb.ErrorCode_RATE_LIMITED {
			limited = we
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if limited == nil || limited.RetryAfterMs == 0 {
		t.Fatalf("5 pulls at once with a 2/s limit: %v", limited)
	}
}

// A device 20,000 messages behind gets the summary and the newest page
// first; the rest drains in the background; after the confirmations its
// cursor is at the head and it got every message (nothing skipped without
// an ack_range).
func TestOfflineTooLongNewestFirstThenDrain(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	const total = 20000
	ids := sendN(t, n, 1, conv, total, "otl")
	waitArchived(t, n, 2*total)

	d := connectDevice(t, n, 2, "phone", deviceOpts{kind: "desktop"})
	w := d.c.Welcome()
	if !w.GetOfflineTooLong() || w.GetPending() != total || w.GetSummary() == nil || len(w.GetSummary().GetConvs()) != 1 ||
		w.GetSummary().GetConvs()[0].GetUnread() != total {
		t.Fatalf("welcome: offline_too_long %v pending %d summary %v", w.GetOfflineTooLong(), w.GetPending(), w.GetSummary())
	}
	first := d.waitFor(1, 30*time.Second)[0]
	if first.MsgID != ids[total-int(w.GetPageSize())] {
		t.Fatalf("first message handed over is %d; want the first of the newest page (%d)", first.MsgID, ids[total-int(w.GetPageSize())])
	}
	d.waitFor(total, 120*time.Second)
	seen := map[int64]bool{}
	for _, m := range d.quiet(500 * time.Millisecond) {
		seen[m.MsgID] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Fatalf("message %d never handed over", id)
		}
	}
	d.close()
	again := connectDevice(t, n, 2, "phone", deviceOpts{})
	if p := again.c.Welcome().GetPending(); p != 0 {
		t.Fatalf("after the drain %d entries are still pending", p)
	}
}

// A client that does not want an old backlog confirms it with ack_range.
func TestAckRangeSkipsAChosenBacklog(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	sendN(t, n, 1, conv, 6000, "skip")
	waitArchived(t, n, 12000)
	// Stop after the newest page; confirm everything up to its last entry.
	d := connectDevice(t, n, 2, "phone", deviceOpts{kind: "mobile", stopAfter: 100})
	page := d.waitFor(100, 30*time.Second)
	if err := d.c.AckRange(page[99].Seq); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	d.close()
	again := connectDevice(t, n, 2, "phone", deviceOpts{})
	if w := again.c.Welcome(); w.GetCursor() != page[99].Seq || w.GetPending() != 0 {
		t.Fatalf("after ack_range to %d: cursor %d pending %d", page[99].Seq, w.GetCursor(), w.GetPending())
	}
	if metric(t, n, "inboxd_gateway_ack_ranges_total") != 1 {
		t.Fatal("ack_range not recorded")
	}
}

// A new device starts from the configured window; a reinstall (a new device
// id) shows the recent messages again.
func TestNewDeviceWindow(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.NewDeviceMax = 50
	cfg.NewDeviceWindow = 2 * time.Second
	n := testnode.StartNode(t, cfg, config.RoleEmbeddedNATS|config.RoleGateway|config.RoleFanout|config.RoleSyncer)
	conv := createConv(t, n, false, 1, 2)
	sendN(t, n, 1, conv, 30, "old")
	time.Sleep(2500 * time.Millisecond) // these fall out of the window
	recent := sendN(t, n, 1, conv, 80, "new")
	waitArchived(t, n, 2*110)
	for _, dev := range []string{"phone", "phone-reinstalled"} {
		d := connectDevice(t, n, 2, dev, deviceOpts{})
		d.waitFor(50, 30*time.Second)
		checkOrderedOnce(t, d.quiet(500*time.Millisecond), recent[30:])
	}
}

// Reading on one device updates the unread count on the user's others,
// online or reconnecting later; the peer of a direct conversation learns
// the delivered and read positions.
func TestReadSyncAndReceipts(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	sender := connectDevice(t, n, 1, "sender", deviceOpts{})
	a := connectDevice(t, n, 2, "a", deviceOpts{})
	b := connectDevice(t, n, 2, "b", deviceOpts{})
	sendN(t, n, 1, conv, 10, "rs")
	a.waitFor(10, 20*time.Second)
	b.waitFor(10, 20*time.Second)
	waitConv(t, b.c, conv, func(c client.Conversation) bool { return c.Unread() == 10 }, "unread 10 on b")
	// Delivered: a's and b's confirmations reach the sender.
	waitConv(t, sender.c, conv, func(c client.Conversation) bool { return c.PeerDelivered == 10 }, "delivered 10 at the sender")

	ctx := ctxT(t, 20*time.Second)
	if _, err := a.c.Read(ctx, conv, 7); err != nil {
		t.Fatal(err)
	}
	waitConv(t, b.c, conv, func(c client.Conversation) bool { return c.ReadSeq == 7 && c.Unread() == 3 }, "read 7 synced to b")
	waitConv(t, sender.c, conv, func(c client.Conversation) bool { return c.PeerRead == 7 }, "read receipt 7 at the sender")

	// An offline device catches up on the read when it reconnects.
	c := connectDevice(t, n, 2, "c", deviceOpts{})
	c.waitFor(10, 20*time.Second)
	waitConv(t, c.c, conv, func(cv client.Conversation) bool { return cv.Unread() == 3 }, "unread 3 on a device that was offline")
	c.close()
	if _, err := b.c.Read(ctx, conv, 10); err != nil {
		t.Fatal(err)
	}
	c2 := connectDevice(t, n, 2, "c", deviceOpts{})
	waitConv(t, c2.c, conv, func(cv client.Conversation) bool { return cv.Unread() == 0 && cv.ReadSeq == 10 }, "read synced after reconnect")
	// Reads never go back.
	if got, err := a.c.Read(ctx, conv, 2); err != nil || got != 10 {
		t.Fatalf("reading back to 2 gave %d, %v", got, err)
	}
}

func waitConv(t *testing.T, c *client.Client, conv int64, ok func(client.Conversation) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		cv := c.Conversations()[conv]
		if ok(cv) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: conversation state %+v (unread %d)", what, cv, cv.Unread())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestGroupReadCount(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, true, 1, 2, 3, 4)
	sendN(t, n, 1, conv, 3, "rc")
	ctx := ctxT(t, 20*time.Second)
	for _, u := range []int64{2, 3} {
		if _, err := connectDevice(t, n, u, "d", deviceOpts{}).c.Read(ctx, conv, 2); err != nil {
			t.Fatal(err)
		}
	}
	c := connectDevice(t, n, 1, "d", deviceOpts{}).c
	for seq, want := range map[int64]int64{1: 2, 2: 2, 3: 0} {
		read, members, err := c.ReadCount(ctx, conv, seq)
		if err != nil || read != want || members != 3 {
			t.Fatalf("message %d: read by %d of %d (%v), want %d of 3", seq, read, members, err, want)
		}
	}
}

// trace derives STORED / DELIVERED / READ per recipient and device; audit
// finds a message stuck behind a device that stopped confirming.
func TestTraceAndAudit(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, true, 1, 2, 3, 4) // 2: offline, 3: delivered, 4: read
	ctx := ctxT(t, 30*time.Second)
	dev3 := connectDevice(t, n, 3, "d3", deviceOpts{})
	dev4 := connectDevice(t, n, 4, "d4", deviceOpts{})
	stuck := connectDevice(t, n, 2, "stuck", deviceOpts{noAck: true}) // receives, never confirms
	snd := connectDevice(t, n, 1, "d1", deviceOpts{})                 // an application: it confirms its own copy too
	r, err := snd.c.Send(ctx, conv, "tr-1", "traced")
	if err != nil {
		t.Fatal(err)
	}
	msg := r.MsgID
	snd.waitFor(1, 10*time.Second)
	dev3.waitFor(1, 10*time.Second)
	dev4.waitFor(1, 10*time.Second)
	stuck.waitFor(1, 10*time.Second)
	if _, err := dev4.c.Read(ctx, conv, 1); err != nil {
		t.Fatal(err)
	}
	waitArchived(t, n, 4+1) // the message's 4 entries and 4's read_sync

	// Confirmations and the archive land asynchronously: poll the trace
	// until it settles (or fails to).
	ac := &admin.Client{NC: testnode.Admin(t, n)}
	want := map[int64]string{2: "STORED", 3: "DELIVERED", 4: "READ", 1: "READ"}
	for deadline := time.Now().Add(20 * time.Second); ; {
		tr, err := ac.Trace(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		status := map[int64]string{}
		for _, r := range tr.Recipients {
			for _, d := range r.Devices {
				status[r.UID] = d.Status
			}
			if len(r.Devices) == 0 {
				status[r.UID] = r.Status
			}
		}
		if maps.Equal(status, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace: %v, want %v", status, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(1500 * time.Millisecond) // uid 2's device row (last_seen) is in the mirror

	a, err := ac.Audit(ctx, admin.AuditRequest{OlderThanMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Stuck) != 1 || a.Stuck[0].UID != 2 || a.Stuck[0].Device != "stuck" || a.Stuck[0].MsgID != msg {
		t.Fatalf("audit: %+v, want the message stuck behind uid 2's device", a.Stuck)
	}
}
