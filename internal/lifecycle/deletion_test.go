package lifecycle_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/lifecycle"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// world is the data of a deletion test: user 1 is deleted; 2 and 3 stay.
type world struct {
	group, direct, held, other int64 // group {1,2,3}, direct {1,2}, held group {1,3}, other {2,3}
	sentBy1                    []int64
	sentBy2, sentBy3           []int64
	entries1, entries2         int // inbox entries of users 1 and 2 before the deletion
	devices1                   int // user 1's devices (each a cursor row and a consumer)
}

// populate gives user 1 memberships in three conversations (one direct),
// sent messages in each, two devices with mirrored cursors and consumers,
// archived inbox entries, and a refused send; users 2 and 3 send too.
func populate(t *testing.T, n *stoppable) world {
	t.Helper()
	w := world{
		group: createConv(t, n.Node, true, 1, 2, 3), direct: createConv(t, n.Node, false, 1, 2),
		held: createConv(t, n.Node, true, 1, 3), other: createConv(t, n.Node, true, 2, 3),
	}
	w.sentBy1 = append(w.sentBy1, sendN(t, n.Node, 1, w.group, 5, "g1")...)
	w.sentBy1 = append(w.sentBy1, sendN(t, n.Node, 1, w.direct, 3, "d1")...)
	w.sentBy1 = append(w.sentBy1, sendN(t, n.Node, 1, w.held, 4, "h1")...)
	w.sentBy2 = sendN(t, n.Node, 2, w.group, 4, "g2")
	w.sentBy3 = sendN(t, n.Node, 3, w.held, 2, "h3")

	// A send of user 1 to a conversation it is not in: a send_reject row.
	c, err := client.Dial(ctxT(t, 10*time.Second), client.Options{URL: n.Gateway.WSURL(), Token: testenv.Token(t, 1, "rejected")})
	if err != nil {
		t.Fatal(err)
	}
	var we *wire.Error
	if _, err := c.Send(ctxT(t, 20*time.Second), w.other, "not-a-member", "nope"); !errors.As(err, &we) || we.Code != pb.ErrorCode_NOT_MEMBER {
		t.Fatalf("send to a conversation user 1 is not in: %v", err)
	}
	c.Close()

	l := testnode.Layout()
	w.entries1 = len(testenv.InboxEntries(t, n.NC, l, 1))
	w.entries2 = len(testenv.InboxEntries(t, n.NC, l, 2))
	// Two devices of user 1 take their inbox and confirm it.
	for _, dev := range []string{"phone", "laptop"} {
		d := connectDevice(t, n.Node, 1, dev)
		d.waitFor(len(w.sentBy1)+len(w.sentBy2)+len(w.sentBy3), 30*time.Second)
		waitFor(t, 20*time.Second, "cursor of "+dev+" mirrored", func() bool {
			return count(t, n.Node, `SELECT count(*) FROM device_cursor WHERE uid = 1 AND device = $1 AND ack_seq > 0`, dev) == 1
		})
		d.c.Close()
	}
	// Its senders are devices too: 3 senders, the refused one, phone, laptop.
	w.devices1 = 6
	waitFor(t, 20*time.Second, "user 1's devices mirrored", func() bool {
		return count(t, n.Node, `SELECT count(*) FROM device_cursor WHERE uid = 1`) == w.devices1 && len(consumersOf(t, n, 1)) == w.devices1
	})
	waitFor(t, 30*time.Second, "user 1's entries archived", func() bool {
		return count(t, n.Node, `SELECT count(*) FROM inbox_archive WHERE uid = 1`) == w.entries1
	})
	if w.entries1 < 18 || count(t, n.Node, `SELECT count(*) FROM send_reject WHERE sender_uid = 1`) != 1 {
		t.Fatalf("user 1 has %d inbox entries (want at least its 18 messages) and %d send rejects (want 1)",
			w.entries1, count(t, n.Node, `SELECT count(*) FROM send_reject WHERE sender_uid = 1`))
	}
	return w
}

// consumersOf returns the names of uid's device consumers.
func consumersOf(t *testing.T, n *stoppable, uid int64) []string {
	t.Helper()
	js, err := jetstream.New(testnode.Admin(t, n.Node))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctxT(t, 10*time.Second), streams.InboxStream(ids.Partition(uid, testnode.Layout().InboxPartitions)))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	l := s.ConsumerNames(ctxT(t, 10*time.Second))
	for name := range l.Name() {
		if strings.HasPrefix(name, "d_"+strconv.FormatInt(uid, 10)+"_") {
			out = append(out, name)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkGone asserts that nothing of user 1 is left but its tombstoned
// sends (and the held ones when heldKept), and that users 2 and 3 kept
// everything (and the extra messages user 3 sent to the group since
// populate).
func checkGone(t *testing.T, n *stoppable, w world, heldKept bool, extra int) {
	t.Helper()
	for what, q := range map[string]string{
		"membership rows":    `SELECT count(*) FROM conv_member WHERE uid = 1`,
		"device_cursor rows": `SELECT count(*) FROM device_cursor WHERE uid = 1`,
		"inbox_archive rows": `SELECT count(*) FROM inbox_archive WHERE uid = 1`,
		"send_reject rows":   `SELECT count(*) FROM send_reject WHERE sender_uid = 1`,
	} {
		if c := count(t, n.Node, q); c != 0 {
			t.Errorf("%d %s of the deleted user are left", c, what)
		}
	}
	if e := testenv.InboxEntries(t, n.NC, testnode.Layout(), 1); len(e) != 0 {
		t.Errorf("%d inbox entries of the deleted user are left in JetStream", len(e))
	}
	if c := consumersOf(t, n, 1); len(c) != 0 {
		t.Errorf("device consumers of the deleted user are left: %v", c)
	}
	wantErased, wantKept := len(w.sentBy1), 0
	if heldKept {
		wantErased, wantKept = 8, 4 // the held group's 4 stay
	}
	if c := count(t, n.Node, `SELECT count(*) FROM msg_content WHERE sender_uid = 1 AND kind = $1 AND body = '' AND sender_device = ''`, wire.KindDeleted); c != wantErased {
		t.Errorf("%d of user 1's %d sent bodies are tombstones, want %d", c, len(w.sentBy1), wantErased)
	}
	if c := count(t, n.Node, `SELECT count(*) FROM msg_content WHERE sender_uid = 1 AND conv_id = $1 AND kind = 1 AND body LIKE 'h1 message %'`, w.held); c != wantKept {
		t.Errorf("%d bodies of user 1 in the held conversation kept, want %d", c, wantKept)
	}
	// Users 2 and 3 keep their bodies, memberships and inbox.
	if c := count(t, n.Node, `SELECT count(*) FROM msg_content WHERE sender_uid IN (2, 3) AND kind = 1 AND body <> ''`); c != len(w.sentBy2)+len(w.sentBy3)+extra {
		t.Errorf("%d bodies of users 2 and 3 intact, want %d", c, len(w.sentBy2)+len(w.sentBy3)+extra)
	}
	if c := count(t, n.Node, `SELECT count(*) FROM conv_member WHERE uid IN (2, 3) AND left_seq IS NULL`); c != 6 {
		t.Errorf("users 2 and 3 have %d memberships, want 6", c)
	}
	if e := testenv.InboxEntries(t, n.NC, testnode.Layout(), 2); len(e) != w.entries2+extra {
		t.Errorf("user 2 has %d inbox entries, want %d", len(e), w.entries2+extra)
	}
}

// A user deletion cut short halfway (its syncer stopped in the middle of
// the bodies step, after a batch) is resumed by the syncer that starts
// next, at that step, and completes: the user's inbox entries (JetStream
// and archive), device consumers and cursor rows, memberships (the direct
// conversation's too) and refused sends are gone, its sent bodies are
// tombstones, and the other users keep everything. Asked again, it
// answers done at once.
func TestUserDeletionResumesAfterCrash(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	n1 := startNode(t, cfg)
	w := populate(t, n1)
	ver := count(t, n1.Node, `SELECT member_ver FROM conversation WHERE conv_id = $1`, w.group)

	var bodyBatches atomic.Int32
	stopped := make(chan struct{})
	lifecycle.SetTestHooks(n1.Lifecycle, func(ctx context.Context, uid int64, step string) error {
		if step == "bodies" && bodyBatches.Add(1) == 2 { // the step began, one batch done
			close(stopped)
			<-ctx.Done() // the syncer goes away here
			return ctx.Err()
		}
		return nil
	}, 100*time.Millisecond, 5)
	d, err := adminOf(t, n1.Node).DeleteUser(ctxT(t, 10*time.Second), admin.DeleteUserRequest{UID: 1})
	if err != nil || d.State == store.DeletionDone {
		t.Fatalf("delete: %+v %v", d, err)
	}
	select {
	case <-stopped:
	case <-time.After(60 * time.Second):
		t.Fatal("the deletion did not reach its second batch of bodies")
	}
	n1.close()

	// What the job recorded when its syncer went away.
	st, err := store.Open(context.Background(), cfg.DatabaseURL, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mid, _, err := st.UserDeletion(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if mid.State != store.DeletionRunning || mid.Step != "bodies" || mid.Runs != 1 || mid.Progress.Bodies != 5 {
		t.Fatalf("after the crash the job is %+v; want running, at step bodies, run 1, 5 bodies erased", mid)
	}

	n2 := startNode(t, cfg)
	done := waitDone(t, n2.Node, 1, 60*time.Second)
	p := done.Progress
	if done.Runs != 2 || p.Conversations != 3 || p.Consumers != int64(w.devices1) || p.Cursors != int64(w.devices1) || p.InboxEntries != int64(w.entries1) ||
		p.ArchiveRows != int64(w.entries1) || p.Bodies != int64(len(w.sentBy1)) || p.BodiesHeld != 0 || p.Rejects != 1 {
		t.Fatalf("done: %+v; want 2 runs, 3 memberships, %d consumers and cursors, %d inbox entries and archive rows, %d bodies, 1 reject",
			done, w.devices1, w.entries1, len(w.sentBy1))
	}
	// Revoked where the admin API has the revocation (issue 13); without
	// it the job says that old tokens still log in.
	if p.Revoked == strings.Contains(p.RevokeNote, "inboxd.admin.user.revoke") {
		t.Errorf("revoked %v (%q): a job that could not revoke must say the tokens still work", p.Revoked, p.RevokeNote)
	}
	checkGone(t, n2, w, false, 0)
	if v := count(t, n2.Node, `SELECT member_ver FROM conversation WHERE conv_id = $1`, w.group); v <= ver {
		t.Errorf("member_ver of the group %d after the deletion, %d before: fanout caches would keep the user", v, ver)
	}

	// Idempotent: asked again, it is done at once, and nothing runs again.
	again, err := adminOf(t, n2.Node).DeleteUser(ctxT(t, 10*time.Second), admin.DeleteUserRequest{UID: 1})
	if err != nil || again.State != store.DeletionDone || again.Runs != 2 || again.FinishedAt == nil || !again.FinishedAt.Equal(*done.FinishedAt) {
		t.Fatalf("asked again: %+v %v; want the same done job", again, err)
	}
}

// While a user is deleted, the other members of its group keep receiving
// the messages sent there, all of them, in order, without a stall; after
// it, every page a member gets (a new device's inbox, a conversation pull,
// an archive page) shows the deleted user's messages at their conv_seqs
// as tombstones (kind deleted, no text) — none shows a body from a
// gateway's cache — except in the conversation under legal hold, whose
// bodies stay.
func TestUserDeletionKeepsHeldBodiesAndOthersReceiveInOrder(t *testing.T) {
	n := startNode(t, testnode.Config(t, testenv.Database(t)))
	w := populate(t, n)
	lifecycle.SetTestHooks(n.Lifecycle, nil, 2*time.Second, 3)
	if _, err := adminOf(t, n.Node).Hold(ctxT(t, 10*time.Second), admin.HoldRequest{ConvID: w.held, Hold: true}); err != nil {
		t.Fatal(err)
	}

	// User 2's tablet follows the group live while user 3 keeps sending.
	tablet := connectDevice(t, n.Node, 2, "tablet")
	before := len(tablet.waitFor(len(w.sentBy1)-4+len(w.sentBy2), 30*time.Second))
	sent := make(chan []int64, 1)
	go func() {
		c, err := client.Dial(context.Background(), client.Options{URL: n.Gateway.WSURL(), Token: testenv.Token(t, 3, "busy")})
		if err != nil {
			t.Error(err)
			sent <- nil
			return
		}
		defer c.Close()
		var out []int64
		for i := 0; i < 40; i++ {
			r, err := c.Send(context.Background(), w.group, "during-"+strconv.Itoa(i), "during "+strconv.Itoa(i))
			if err != nil {
				t.Error(err)
				break
			}
			out = append(out, r.MsgID)
			time.Sleep(25 * time.Millisecond)
		}
		sent <- out
	}()
	time.Sleep(200 * time.Millisecond) // the sends are under way
	if _, err := adminOf(t, n.Node).DeleteUser(ctxT(t, 10*time.Second), admin.DeleteUserRequest{UID: 1}); err != nil {
		t.Fatal(err)
	}
	done := waitDone(t, n.Node, 1, 60*time.Second)
	during := <-sent
	if len(during) != 40 {
		t.Fatalf("%d of 40 sends during the deletion stored", len(during))
	}
	got := tablet.waitFor(before+40, 30*time.Second)
	last := map[int64]int64{}
	for _, m := range got {
		if m.ConvSeq <= last[m.ConvID] {
			t.Fatalf("tablet: conversation %d conv_seq %d after %d", m.ConvID, m.ConvSeq, last[m.ConvID])
		}
		last[m.ConvID] = m.ConvSeq
	}
	if p := done.Progress; p.Bodies != 8 || p.BodiesHeld != 4 {
		t.Fatalf("progress %+v: want 8 bodies erased, 4 held", p)
	}
	checkGone(t, n, w, true, len(during))

	// A new device of user 2 gets its whole inbox: user 1's messages are
	// tombstones at their conv_seqs, the conversations stay dense.
	isTombstone := func(m client.Message) bool { return m.Kind == wire.KindDeleted && m.Text == "" }
	fresh := connectDevice(t, n.Node, 2, "fresh")
	all := fresh.waitFor(5+3+len(w.sentBy2)+40, 30*time.Second)
	dense := map[int64]int64{}
	tombs := 0
	for _, m := range all {
		if m.ConvSeq != dense[m.ConvID]+1 {
			t.Fatalf("fresh device: conversation %d conv_seq %d after %d", m.ConvID, m.ConvSeq, dense[m.ConvID])
		}
		dense[m.ConvID] = m.ConvSeq
		if m.SenderUID == 1 {
			if !isTombstone(m) {
				t.Fatalf("fresh device: user 1's message %d is kind %d %q, want a tombstone (kind %d, no text)", m.MsgID, m.Kind, m.Text, wire.KindDeleted)
			}
			tombs++
		} else if isTombstone(m) || m.Text == "" {
			t.Fatalf("fresh device: message %d of user %d lost its body", m.MsgID, m.SenderUID)
		}
	}
	if tombs != 8 {
		t.Fatalf("fresh device: %d tombstones, want 8", tombs)
	}

	// User 3 pulls the group and the held conversation.
	c3 := connectDevice(t, n.Node, 3, "pull")
	pulled, _, err := c3.c.Pull(ctxT(t, 10*time.Second), w.group, 0, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	tombs = 0
	for i, m := range pulled {
		if m.ConvSeq != int64(i+1) {
			t.Fatalf("pull: conv_seq %d at %d", m.ConvSeq, i)
		}
		if m.SenderUID == 1 && isTombstone(m) {
			tombs++
		}
	}
	if tombs != 5 {
		t.Fatalf("pull of the group: %d tombstones of user 1, want 5", tombs)
	}
	held, _, err := c3.c.Pull(ctxT(t, 10*time.Second), w.held, 0, 0, 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range held {
		if m.SenderUID == 1 && (isTombstone(m) || !strings.HasPrefix(m.Text, "h1 message ")) {
			t.Fatalf("pull of the held conversation: user 1's message %d is %d %q, want its body", m.ConvSeq, m.Kind, m.Text)
		}
	}

	// An archive page (older ranges are read from Postgres, the bodies by
	// msg_id) shows them so too.
	page, _, err := n.Store.ArchivePage(context.Background(), nil, nil, 2, 0, 1<<62, 1000)
	if err != nil {
		t.Fatal(err)
	}
	tombs = 0
	for _, m := range testenv.WithBodies(t, n.Store, page) {
		if m.SenderUID == 1 && m.Kind == wire.KindDeleted && m.Text == "" {
			tombs++
		}
	}
	if tombs != 8 {
		t.Fatalf("archive page of user 2: %d tombstones, want 8", tombs)
	}
}

// What comes back while a deletion runs — an inbox entry published late
// (a fanout batch that committed before the memberships went) and a
// cursor row written back (a device's gateway) — is found by the last
// step, which sends the job through the steps once more: the deletion
// completes with nothing left.
func TestUserDeletionRemovesWhatCameBack(t *testing.T) {
	n := startNode(t, testnode.Config(t, testenv.Database(t)))
	w := populate(t, n)
	js, err := jetstream.New(testnode.Admin(t, n.Node))
	if err != nil {
		t.Fatal(err)
	}
	l := testnode.Layout()
	p := ids.Partition(1, l.InboxPartitions)
	var verifies atomic.Int32
	lifecycle.SetTestHooks(n.Lifecycle, func(ctx context.Context, uid int64, step string) error {
		if step != "verify" || verifies.Add(1) != 1 {
			return nil
		}
		e := streams.Entry{MsgID: w.sentBy2[0], ConvID: w.group, ConvSeq: 6, SenderUID: 2, Kind: wire.KindText}
		body, err := e.Marshal()
		if err != nil {
			return err
		}
		if _, err := js.PublishMsg(ctx, e.Msg(p, 1, body, "late")); err != nil {
			return err
		}
		_, err = n.Store.Pool.Exec(ctx, `INSERT INTO device_cursor (uid, device, consumer, ack_seq) VALUES (1, 'back', 'd_1_back', 3)`)
		return err
	}, 100*time.Millisecond, 0)
	if _, err := adminOf(t, n.Node).DeleteUser(ctxT(t, 10*time.Second), admin.DeleteUserRequest{UID: 1}); err != nil {
		t.Fatal(err)
	}
	done := waitDone(t, n.Node, 1, 60*time.Second)
	if done.Progress.Rounds != 1 || done.Progress.InboxEntries != int64(w.entries1)+1 || done.Progress.Cursors != int64(w.devices1)+1 {
		t.Fatalf("done: %+v; want one more pass that removed the late entry and the cursor row", done.Progress)
	}
	checkGone(t, n, w, false, 0)
}

// The purge of the user's inbox waits until the archiver has copied its
// partition up to the head: the archiver copies contiguous runs of
// sequences only, and a purge ahead of it would leave it a gap it cannot
// pass (and let it write a copy of a purged entry back into the archive).
func TestUserDeletionPurgesOnlyBehindTheArchiver(t *testing.T) {
	n := startNode(t, testnode.Config(t, testenv.Database(t)))
	w := populate(t, n)
	lifecycle.SetTestHooks(n.Lifecycle, nil, 100*time.Millisecond, 0)
	p := ids.Partition(1, testnode.Layout().InboxPartitions)
	var archived int64
	if err := n.Store.Pool.QueryRow(context.Background(), `SELECT archived_seq FROM archive_progress WHERE partition = $1`, p).Scan(&archived); err != nil {
		t.Fatal(err)
	}
	// The archiver's mark as if it were behind (it is idle: nothing moves it).
	if _, err := n.Store.Pool.Exec(context.Background(), `UPDATE archive_progress SET archived_seq = 1 WHERE partition = $1`, p); err != nil {
		t.Fatal(err)
	}
	if _, err := adminOf(t, n.Node).DeleteUser(ctxT(t, 10*time.Second), admin.DeleteUserRequest{UID: 1}); err != nil {
		t.Fatal(err)
	}
	ac := adminOf(t, n.Node)
	waitFor(t, 30*time.Second, "the deletion waits for the archiver", func() bool {
		d, err := ac.Deletion(ctxT(t, 10*time.Second), 1)
		return err == nil && d.Step == "inbox" && strings.Contains(d.Progress.Waiting, "archiver")
	})
	time.Sleep(500 * time.Millisecond)
	if e := testenv.InboxEntries(t, n.NC, testnode.Layout(), 1); len(e) != w.entries1 {
		t.Fatalf("%d of the user's %d inbox entries left while the archiver is behind: purged ahead of it", len(e), w.entries1)
	}
	if _, err := n.Store.Pool.Exec(context.Background(), `UPDATE archive_progress SET archived_seq = $2 WHERE partition = $1`, p, archived); err != nil {
		t.Fatal(err)
	}
	waitDone(t, n.Node, 1, 30*time.Second)
	checkGone(t, n, w, false, 0)
}

// The deletion revokes the user first (the admin API's revocation): a
// device of the user still connected is closed (ErrRevoked) and cannot
// write its cursor back, so one pass suffices; a token issued before the
// deletion no longer logs in.
func TestDeletedUserIsRevoked(t *testing.T) {
	n := startNode(t, testnode.Config(t, testenv.Database(t)))
	w := populate(t, n)
	lifecycle.SetTestHooks(n.Lifecycle, nil, 100*time.Millisecond, 0)
	oldToken := testenv.Token(t, 1, "phone")
	online := connectDevice(t, n.Node, 1, "tablet")
	online.waitFor(len(w.sentBy1)+len(w.sentBy2)+len(w.sentBy3), 30*time.Second)
	time.Sleep(1100 * time.Millisecond) // iat has a precision of a second: the revocation comes after it

	if _, err := adminOf(t, n.Node).DeleteUser(ctxT(t, 10*time.Second), admin.DeleteUserRequest{UID: 1}); err != nil {
		t.Fatal(err)
	}
	done := waitDone(t, n.Node, 1, 60*time.Second)
	if !done.Progress.Revoked || done.Progress.Rounds != 0 {
		t.Fatalf("done: %+v; want the user revoked and one pass", done.Progress)
	}
	select {
	case <-online.c.Done():
		if !errors.Is(online.c.Err(), client.ErrRevoked) {
			t.Fatalf("the connected device stopped with %v, want ErrRevoked", online.c.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the deleted user's connected device is still connected")
	}
	_, err := client.Dial(ctxT(t, 10*time.Second), client.Options{URL: n.Gateway.WSURL(), Token: oldToken})
	if !errors.Is(err, client.ErrRevoked) {
		t.Fatalf("a token issued before the deletion: %v, want ErrRevoked", err)
	}
	time.Sleep(1500 * time.Millisecond) // past the mirror's flush: nothing was written back
	checkGone(t, n, w, false, 0)
}

// Under the installation-wide legal hold every conversation is held;
// without it, what the store records (conversations' own holds).
func TestInstallationHoldHoldsEveryConversation(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	for _, tc := range []struct {
		hold bool
		want int
	}{{true, 3}, {false, 0}} {
		l := lifecycle.New(lifecycle.Options{LegalHold: tc.hold}, testenv.Logger(t), nil, nil, st, prometheus.NewRegistry())
		held, err := lifecycle.Held(l, ctx, []int64{4, 5, 6})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, h := range held {
			if h {
				n++
			}
		}
		if n != tc.want {
			t.Errorf("installation hold %v: %d of 3 conversations held, want %d", tc.hold, n, tc.want)
		}
	}
}

// The subjects a deletion calls are the admin API's.
func TestDeletionUsesTheAdminSubjects(t *testing.T) {
	if lifecycle.RevokeSubject != admin.SubjectUserRevoke || lifecycle.ConvChanged != admin.SubjectConvChanged {
		t.Fatalf("lifecycle calls %q and announces %q; the admin API serves %q and announces %q",
			lifecycle.RevokeSubject, lifecycle.ConvChanged, admin.SubjectUserRevoke, admin.SubjectConvChanged)
	}
}
