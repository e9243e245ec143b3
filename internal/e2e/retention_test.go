package e2e

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// Retention in Postgres (docs/operations.md, "Retention"): the tests run a
// node whose time ranges are a second wide and whose retention is a few
// seconds, so ranges expire while the test watches.

// retentionWidth and retentionAge are the tests' --partition-width and
// --retention.
const (
	retentionWidth = time.Second
	retentionAge   = 5 * time.Second
)

func retentionNode(t *testing.T, edit func(*config.Config)) *node.Node {
	t.Helper()
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.Retention, cfg.PartitionWidth = retentionAge, retentionWidth
	if edit != nil {
		edit(&cfg)
	}
	return testnode.StartNode(t, cfg, config.RoleAllInOne)
}

// waitUntil polls cond until it holds or within passes; then it fails with
// what cond said last.
func waitUntil(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s (%s)", what, within, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitExpired waits until retention removed conv's messages up to convSeq
// (its horizon is recorded and the rows are gone).
func waitExpired(t testing.TB, n *node.Node, conv, convSeq int64) {
	t.Helper()
	waitUntil(t, 4*retentionAge, fmt.Sprintf("conversation %d expired up to %d", conv, convSeq), func() (bool, string) {
		h := count(t, n, `SELECT coalesce(max(expired_seq), 0)::int FROM conv_expiry WHERE conv_id = $1`, conv)
		left := count(t, n, `SELECT count(*) FROM msg_content WHERE conv_id = $1 AND conv_seq <= $2`, conv, convSeq)
		return h >= int(convSeq) && left == 0, fmt.Sprintf("horizon %d, %d rows left", h, left)
	})
}

// app is an application on the real client package that remembers, per
// conversation, the highest conv_seq it stored (Options.LastConvSeq): a
// restarted app keeps conv_seq order across its sessions.
type app struct {
	mu   sync.Mutex
	got  []client.Message
	last map[int64]int64
}

func newApp() *app { return &app{last: map[int64]int64{}} }

func (a *app) handle(m client.Message) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, m)
	a.last[m.ConvID] = max(a.last[m.ConvID], m.ConvSeq)
	return nil
}

func (a *app) lastConvSeq(conv int64) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last[conv]
}

func (a *app) messages() []client.Message {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.got)
}

func (a *app) dial(t testing.TB, n *node.Node, uid int64, device string) *client.Client {
	t.Helper()
	c, err := client.Dial(ctxT(t, 20*time.Second), client.Options{
		URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, uid, device),
		Handler: a.handle, LastConvSeq: a.lastConvSeq, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("dial %d/%s: %v", uid, device, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// waitApp waits until a holds n messages.
func (a *app) wait(t testing.TB, n int, within time.Duration) []client.Message {
	t.Helper()
	waitUntil(t, within, fmt.Sprintf("%d messages handed over", n), func() (bool, string) {
		got := a.messages()
		return len(got) >= n, fmt.Sprintf("%d handed over", len(got))
	})
	return a.messages()
}

// Retention removes whole ranges while a sender and a receiving device go
// on: every send is stored, the receiver gets every message once and in
// order, ranges past the horizon are gone (their bodies and inbox entries)
// and nothing newer than the horizon is missing; the archiver and the
// fanout never failed a batch for want of a partition.
func TestRetentionRemovesRangesWhileSendsAndSyncsRun(t *testing.T) {
	n := retentionNode(t, nil)
	conv := createConv(t, n, false, 1, 2)
	recv := newApp()
	recv.dial(t, n, 2, "phone")
	sender, err := client.Dial(ctxT(t, 20*time.Second), client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, 1, "laptop")})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()

	dropped0 := metric(t, n, `inboxd_retention_ranges_total{result="dropped"}`)
	ctx := ctxT(t, time.Minute)
	var sent []int64
	run := 3 * retentionAge
	for i, end := 0, time.Now().Add(run); time.Now().Before(end); i++ {
		r, err := sender.Send(ctx, conv, "r-"+strconv.Itoa(i), "message "+strconv.Itoa(i))
		if err != nil {
			t.Fatalf("send %d while retention runs: %v", i, err)
		}
		sent = append(sent, r.MsgID)
		time.Sleep(10 * time.Millisecond)
	}
	dropped := metric(t, n, `inboxd_retention_ranges_total{result="dropped"}`) - dropped0
	if dropped < 3 {
		t.Fatalf("%v ranges dropped in %s of sends (retention %s, ranges of %s), want several", dropped, run, retentionAge, retentionWidth)
	}
	msgs := recv.wait(t, len(sent), 20*time.Second)
	checkOrderedOnce(t, msgs, sent)

	// Only ranges past the horizon are gone: a message newer than it is
	// there (its body and both inbox entries), a missing one is older;
	// and the oldest ones did go. (A range goes once all of it is older
	// than the horizon at the time: what is missing at the end of the
	// query is older than the horizon at its end.)
	last := sent[len(sent)-1]
	waitUntil(t, 10*time.Second, "the last message archived", func() (bool, string) {
		return count(t, n, `SELECT count(*) FROM inbox_archive WHERE msg_id = $1 AND tkey = $1`, last) == 2, ""
	})
	bodies, entries := map[int64]int{}, map[int64]int{}
	rows, err := n.Store.Pool.Query(context.Background(), `
		SELECT msg_id, 1 FROM msg_content WHERE msg_id = ANY($1::bigint[])
		UNION ALL SELECT msg_id, 2 FROM inbox_archive WHERE msg_id = ANY($1::bigint[])`, sent)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var table int
		if err := rows.Scan(&id, &table); err != nil {
			t.Fatal(err)
		}
		if table == 1 {
			bodies[id]++
		} else {
			entries[id]++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	horizon := time.Now().Add(-retentionAge)
	var gone int
	for _, id := range sent {
		switch at := ids.Time(id); {
		case !at.Before(horizon) && (bodies[id] != 1 || entries[id] != 2):
			t.Fatalf("message %d of %s (after the horizon %s): %d bodies, %d archived entries, want 1 and 2",
				id, at.Format(time.StampMilli), horizon.Format(time.StampMilli), bodies[id], entries[id])
		case bodies[id] == 0:
			gone++
			if entries[id] != 0 {
				t.Fatalf("message %d: body gone, %d inbox entries still point at it", id, entries[id])
			}
		}
	}
	if gone == 0 {
		t.Fatalf("none of %d messages is gone", len(sent))
	}
	if e := metric(t, n, "inboxd_archive_batch_errors_total"); e != 0 {
		t.Fatalf("the archiver failed %v batches", e)
	}
	if e := metric(t, n, "inboxd_retention_errors_total"); e != 0 {
		t.Fatalf("%v retention runs failed", e)
	}
	// A range's rows are counted once its drop is complete, which is after
	// its msg_content partition left (the query above may fall between).
	waitUntil(t, 10*time.Second, "every message gone counted in inboxd_retention_rows_removed_total", func() (bool, string) {
		r := metric(t, n, `inboxd_retention_rows_removed_total{table="msg_content"}`)
		return int(r) >= gone, fmt.Sprintf("%v counted, %d messages gone", r, gone)
	})
	t.Logf("%d messages sent and synced, %d ranges dropped, %d messages gone", len(sent), int(dropped), gone)
}

// A device whose backlog crossed the retention horizon while it was away
// gets the expired range and goes on: it hands over every retained message
// in conv_seq order, none flagged Late, without a single gap pull, and its
// cursor reaches the end. Its backlog is read from the Postgres archive,
// where the expired entries are gone (the batch's expired range tells the
// client), or from the stream, which still holds the entries (each comes
// marked expired).
func TestDeviceBacklogAcrossRetentionHorizonContinues(t *testing.T) {
	for _, tc := range []struct {
		name      string
		tailScan  int
		flagged   bool // the expired entries come one by one (from the stream)
		rangeOnly bool // the batch's expired range alone tells the client
	}{
		{name: "archive", tailScan: 1, rangeOnly: true},
		{name: "stream", tailScan: 100000, flagged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := retentionNode(t, func(c *config.Config) { c.TailScan = tc.tailScan })
			conv := createConv(t, n, false, 1, 2)
			b := newApp()
			bc := b.dial(t, n, 2, "phone")
			first := sendN(t, n, 1, conv, 5, "before")
			b.wait(t, 5, 10*time.Second)
			waitUntil(t, 10*time.Second, "the first messages confirmed", func() (bool, string) {
				p := count(t, n, `SELECT count(*) FROM device_cursor WHERE uid = 2 AND ack_seq > 0`)
				return p == 1, ""
			})
			bc.Close()

			// Away: 6..30 are sent and expire; 31..40 are sent after.
			sendN(t, n, 1, conv, 25, "away")
			waitExpired(t, n, conv, 30)
			kept := sendN(t, n, 1, conv, 10, "after")

			c := b.dial(t, n, 2, "phone")
			msgs := b.wait(t, 15, 15*time.Second)
			checkOrderedOnce(t, msgs, append(slices.Clone(first), kept...))
			for _, m := range msgs[5:] {
				if m.Late || m.ConvSeq <= 30 {
					t.Fatalf("handed over %+v after the expired range", m)
				}
			}
			st := c.Stats()
			if st.GapPulls != 0 {
				t.Fatalf("the client pulled %d times to fill the expired gap: %+v", st.GapPulls, st)
			}
			if got := c.Conversations()[conv].ExpiredUpTo; got < 30 {
				t.Fatalf("the client learned the horizon %d, want at least 30", got)
			}
			switch {
			case tc.flagged && st.Expired != 25:
				t.Fatalf("%d entries came marked expired, want 25 (6..30): %+v", st.Expired, st)
			case tc.rangeOnly && st.Expired != 0:
				t.Fatalf("%d entries came marked expired from the archive, whose entries are gone: %+v", st.Expired, st)
			}
			// The cursor reaches the inbox's end (the mirror of it in
			// Postgres): nothing is left pending.
			waitUntil(t, 10*time.Second, "the device confirmed everything", func() (bool, string) {
				ack := count(t, n, `SELECT ack_seq::int FROM device_cursor WHERE uid = 2 AND device = 'phone'`)
				last := count(t, n, `SELECT coalesce(max(seq), 0)::int FROM inbox_archive WHERE uid = 2 AND msg_id = $1 AND tkey = $1`, kept[len(kept)-1])
				return last > 0 && ack >= last, fmt.Sprintf("cursor %d, last entry %d", ack, last)
			})
		})
	}
}

// A conversation under legal hold keeps its bodies and inbox entries past
// the horizon while the others' go; its range is rebuilt with only its
// rows. Once the hold is lifted they go too, and its horizon says so. An
// installation-wide --legal-hold removes nothing.
func TestLegalHoldKeepsBodiesPastTheHorizon(t *testing.T) {
	t.Run("conversation", func(t *testing.T) {
		n := retentionNode(t, nil)
		held := createConv(t, n, false, 1, 2)
		other := createConv(t, n, false, 1, 3)
		ac := &admin.Client{NC: testnode.Admin(t, n)}
		h, err := ac.Hold(ctxT(t, 10*time.Second), admin.HoldRequest{ConvID: held, Hold: true})
		if err != nil || !h.Held {
			t.Fatalf("hold: %+v, %v", h, err)
		}
		heldIDs := sendN(t, n, 1, held, 10, "held")
		sendN(t, n, 1, other, 10, "other")
		waitExpired(t, n, other, 10)
		waitRetentionPast(t, n, heldIDs[9])
		if got := count(t, n, `SELECT count(*) FROM msg_content WHERE conv_id = $1`, held); got != 10 {
			t.Fatalf("the held conversation has %d of its 10 bodies", got)
		}
		if got := count(t, n, `SELECT count(*) FROM inbox_archive WHERE conv_id = $1 AND msg_id <> 0`, held); got != 20 {
			t.Fatalf("the held conversation has %d of its 20 archived entries", got)
		}
		d := newApp().dial(t, n, 2, "laptop")
		pg, err := d.PullPage(ctxT(t, 10*time.Second), held, 0, 0, 50)
		if err != nil || len(pg.Messages) != 10 || pg.ExpiredUpTo != 0 {
			t.Fatalf("pull of the held conversation: %d messages, expired up to %d (%v)", len(pg.Messages), pg.ExpiredUpTo, err)
		}
		if r := metric(t, n, `inboxd_retention_ranges_total{result="rebuilt"}`); r == 0 {
			t.Fatal("no range rebuilt")
		}
		show, err := ac.ShowConv(ctxT(t, 10*time.Second), held)
		if err != nil || !show.LegalHold {
			t.Fatalf("conv show: %+v, %v", show, err)
		}

		if _, err := ac.Hold(ctxT(t, 10*time.Second), admin.HoldRequest{ConvID: held, Hold: false}); err != nil {
			t.Fatal(err)
		}
		waitExpired(t, n, held, 10)
		pg, err = d.PullPage(ctxT(t, 10*time.Second), held, 0, 0, 50)
		if err != nil || len(pg.Messages) != 0 || pg.ExpiredUpTo != 10 {
			t.Fatalf("pull after the hold was lifted: %d messages, expired up to %d (%v)", len(pg.Messages), pg.ExpiredUpTo, err)
		}
	})
	t.Run("installation", func(t *testing.T) {
		n := retentionNode(t, func(c *config.Config) { c.LegalHold = true })
		conv := createConv(t, n, false, 1, 2)
		all := sendN(t, n, 1, conv, 10, "all")
		waitRetentionPast(t, n, all[9])
		if got := count(t, n, `SELECT count(*) FROM msg_content WHERE conv_id = $1`, conv); got != 10 {
			t.Fatalf("under --legal-hold %d of 10 bodies are left", got)
		}
		if metric(t, n, "inboxd_retention_legal_hold") != 1 {
			t.Fatal("inboxd_retention_legal_hold is not 1")
		}
	})
}

// waitRetentionPast waits until a retention run went by after the range
// of message id passed the horizon.
func waitRetentionPast(t *testing.T, n *node.Node, id int64) {
	t.Helper()
	past := ids.Time(id).Add(retentionAge + 2*retentionWidth)
	waitUntil(t, 4*retentionAge, "a retention run after the range passed the horizon", func() (bool, string) {
		last := metric(t, n, "inboxd_retention_last_run_timestamp_seconds")
		return last > float64(past.UnixMilli())/1000, fmt.Sprintf("last run %.3f", last)
	})
}

// The summary and a pull of an expired range say so: a conversation whose
// every message expired stays in the summary (its unread count, the
// horizon, the last message's id and time, no preview), then with a newer
// message its preview; a pull after 0 brings what is left and the horizon,
// a pull below the horizon brings nothing and the horizon.
func TestSummaryAndPullOfAnExpiredRange(t *testing.T) {
	n := retentionNode(t, nil)
	conv := createConv(t, n, false, 1, 2)
	old := sendN(t, n, 1, conv, 10, "old")
	waitExpired(t, n, conv, 10)

	c := newApp().dial(t, n, 2, "tablet")
	s, err := c.Summary(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.GetConvs()) != 1 {
		t.Fatalf("summary: %v, want the conversation whose messages expired", s.GetConvs())
	}
	cs := s.GetConvs()[0]
	if cs.GetConvId() != conv || cs.GetUnread() != 10 || cs.GetExpiredUpToConvSeq() != 10 || cs.GetLastMsgId() != old[9] ||
		cs.GetLastPreview() != "" || cs.GetLastAtMs() != ids.Time(old[9]).UnixMilli() {
		t.Fatalf("summary of the expired conversation: %v (last msg_id %d)", cs, old[9])
	}

	sendN(t, n, 1, conv, 2, "new")
	s, err = c.Summary(ctxT(t, 10*time.Second))
	if err != nil || len(s.GetConvs()) != 1 {
		t.Fatalf("summary: %v, %v", s, err)
	}
	if cs := s.GetConvs()[0]; cs.GetUnread() != 12 || cs.GetExpiredUpToConvSeq() != 10 || cs.GetLastPreview() != "new message 1" {
		t.Fatalf("summary after new messages: %v", cs)
	}
	pg, err := c.PullPage(ctxT(t, 10*time.Second), conv, 0, 0, 50)
	if err != nil || len(pg.Messages) != 2 || pg.Messages[0].ConvSeq != 11 || pg.ExpiredUpTo != 10 || pg.HasMore {
		t.Fatalf("pull after 0: %+v (%v), want 11 and 12, expired up to 10", pg, err)
	}
	pg, err = c.PullPage(ctxT(t, 10*time.Second), conv, 0, 11, 50)
	if err != nil || len(pg.Messages) != 0 || pg.ExpiredUpTo != 10 || pg.HasMore {
		t.Fatalf("pull before 11: %+v (%v), want nothing, expired up to 10", pg, err)
	}
	if got := c.Conversations()[conv].ExpiredUpTo; got != 10 {
		t.Fatalf("the client's conversation says expired up to %d, want 10", got)
	}
}
