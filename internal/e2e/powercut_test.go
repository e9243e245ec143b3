package e2e

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// A power cut of an all-in-one box loses what its NATS server had not
// fsynced (nats-server syncs every 2 minutes by default), while Postgres,
// which fsyncs its WAL at every commit, keeps the messages, their fanned_out
// marks and, since the fanout writes them in the same transaction, their
// inbox entries at their seqs. Modelled here on a real node: 30 messages
// sent and confirmed by device a, 20 more STORED, the node stopped, every
// INBOX block file cut back to its size before those 20 (what a cut before
// the next fsync leaves), the node started again, 10 more sent. Device a
// then gets every message after its cursor and the new device b all 60,
// each once, in order, from its inbox (none filled in by a conversation
// pull), in three situations: the archiver had not copied the 20 yet, the
// archiver had not and device a had confirmed them live (its mirrored
// cursor above what the stream kept), and the archiver had copied them.
func TestPowerCutLosesNoStoredMessage(t *testing.T) {
	for _, c := range []struct {
		name   string
		hold   bool // the archiver does not copy the 20 before the cut
		online bool // device a receives and confirms the 20 before the cut
	}{
		{"archiver behind", true, false},
		{"device ahead of the stream", true, true},
		{"archived", false, false},
	} {
		t.Run(c.name, func(t *testing.T) { testPowerCut(t, c.hold, c.online) })
	}
}

func testPowerCut(t *testing.T, hold, online bool) {
	cfg := testnode.Config(t, testenv.Database(t))
	n := testnode.StartNode(t, cfg, config.RoleAllInOne)
	conv := createConv(t, n, false, 1, 2)
	p := ids.Partition(2, testnode.Layout().InboxPartitions)

	a := connectDevice(t, n, 2, "a", deviceOpts{})
	first := sendN(t, n, 1, conv, 30, "first")
	a.waitFor(30, 20*time.Second)
	waitMirrored(t, n, 2, "a")
	waitStreamArchived(t, n, p)
	snap := snapshotInbox(t, cfg.DataDir)

	if !online {
		a.close()
	}
	release := func() {}
	if hold {
		release = lockArchiveProgress(t, cfg.DatabaseURL)
	}
	second := sendN(t, n, 1, conv, 20, "second") // STORED
	if online {
		a.waitFor(50, 20*time.Second)
		waitMirrored(t, n, 2, "a")
		a.close()
	} else if !hold {
		waitStreamArchived(t, n, p)
	}
	n.Close()
	release()
	if cut := snap.cut(t); cut == 0 {
		t.Fatal("the cut took nothing from the INBOX block files")
	}

	n2 := testnode.StartNode(t, cfg, config.RoleAllInOne)
	third := sendN(t, n2, 1, conv, 10, "third")
	js, err := jetstream.New(testnode.Admin(t, n2))
	if err != nil {
		t.Fatal(err)
	}
	s, err := js.Stream(ctxT(t, 10*time.Second), streams.InboxStream(p))
	if err != nil {
		t.Fatal(err)
	}
	if first := s.CachedInfo().State.FirstSeq; first <= 50 {
		t.Errorf("after the cut %s's first seq is %d: seqs handed out before were handed out again", streams.InboxStream(p), first)
	}

	wantA := append(append([]int64(nil), second...), third...)
	if online {
		wantA = third
	}
	a2 := connectDevice(t, n2, 2, "a", deviceOpts{})
	b := connectDevice(t, n2, 2, "b", deviceOpts{})
	checkInbox(t, "a", a2, wantA, first)
	checkInbox(t, "b", b, append(append(append([]int64(nil), first...), second...), third...), nil)
	if got := metric(t, n2, "inboxd_archive_streams_fenced_total"); got < 1 {
		t.Errorf("inboxd_archive_streams_fenced_total = %v, want at least 1", got)
	}
}

// checkInbox waits for want on d and checks that each came once, in
// conv_seq order, from the device's inbox (not a conversation pull);
// repeats of allowed (confirmed before, repeats are no skip) are counted
// as such.
func checkInbox(t *testing.T, name string, d *device, want, allowed []int64) {
	t.Helper()
	wanted := map[int64]bool{}
	for _, id := range want {
		wanted[id] = true
	}
	repeat := map[int64]bool{}
	for _, id := range allowed {
		repeat[id] = true
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		seen := map[int64]int{}
		var lastSeq int64
		var problems []string
		for _, m := range d.messages() {
			seen[m.MsgID]++
			switch {
			case m.Lane == "pull":
				problems = append(problems, fmt.Sprintf("msg %d (conv_seq %d) came by a pull, not from the inbox", m.MsgID, m.ConvSeq))
			case !wanted[m.MsgID] && !repeat[m.MsgID]:
				problems = append(problems, fmt.Sprintf("msg %d (conv_seq %d) was not sent to it", m.MsgID, m.ConvSeq))
			case wanted[m.MsgID] && m.ConvSeq <= lastSeq:
				problems = append(problems, fmt.Sprintf("msg %d conv_seq %d after %d", m.MsgID, m.ConvSeq, lastSeq))
			}
			if wanted[m.MsgID] {
				lastSeq = m.ConvSeq
			}
		}
		missing := 0
		for _, id := range want {
			switch seen[id] {
			case 0:
				missing++
			case 1:
			default:
				problems = append(problems, fmt.Sprintf("msg %d handed over %d times", id, seen[id]))
			}
		}
		if len(problems) > 0 {
			t.Fatalf("device %s: %s", name, strings.Join(problems, "; "))
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("device %s: %d of %d messages never arrived (got %d messages)", name, missing, len(want), len(d.messages()))
		}
		time.Sleep(50 * time.Millisecond) // polls the device's state
	}
}

// waitMirrored waits until the device's mirrored cursor reaches uid's
// newest message entry.
func waitMirrored(t *testing.T, n *node.Node, uid int64, device string) {
	t.Helper()
	waitCond(t, 20*time.Second, "the device's cursor mirrored at its newest entry", func() (bool, string) {
		var mirror, newest int64
		err := n.Store.Pool.QueryRow(context.Background(), `
			SELECT coalesce((SELECT ack_seq FROM device_cursor WHERE uid = $1 AND device = $2), 0),
			       coalesce((SELECT max(seq) FROM inbox_archive WHERE uid = $1 AND msg_id <> 0), 0)`, uid, device).Scan(&mirror, &newest)
		if err != nil {
			return false, err.Error()
		}
		return newest > 0 && mirror >= newest, fmt.Sprintf("mirror %d, newest entry %d", mirror, newest)
	})
}

// waitStreamArchived waits until the archiver's mark of partition p is at
// its stream's last seq.
func waitStreamArchived(t *testing.T, n *node.Node, p int) {
	t.Helper()
	js, err := jetstream.New(testnode.Admin(t, n))
	if err != nil {
		t.Fatal(err)
	}
	waitCond(t, 20*time.Second, "the archiver at the stream's last entry", func() (bool, string) {
		s, err := js.Stream(context.Background(), streams.InboxStream(p))
		if err != nil {
			return false, err.Error()
		}
		mark := count(t, n, `SELECT coalesce((SELECT archived_seq FROM archive_progress WHERE partition = $1), 0)`, p)
		last := s.CachedInfo().State.LastSeq
		return uint64(mark) >= last, fmt.Sprintf("mark %d, last seq %d", mark, last)
	})
}

// lockArchiveProgress holds archive_progress locked on a connection of its
// own (the node's pools close with it) until release: the archiver copies
// nothing meanwhile.
func lockArchiveProgress(t *testing.T, url string) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE archive_progress IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return func() {
		_ = tx.Rollback(ctx)
		_ = conn.Close(ctx)
	}
}

// inboxSnapshot is the size of every INBOX block file of a node's
// JetStream store.
type inboxSnapshot struct {
	root  string
	sizes map[string]int64
}

func inboxBlocks(t *testing.T, root string) map[string]int64 {
	t.Helper()
	sizes := map[string]int64{}
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && strings.HasSuffix(path, ".blk") && strings.Contains(path, "/streams/INBOX_") && strings.Contains(path, "/msgs/") {
			info, err := e.Info()
			if err != nil {
				return err
			}
			sizes[path] = info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sizes
}

func snapshotInbox(t *testing.T, dataDir string) inboxSnapshot {
	root := filepath.Join(dataDir, "jetstream")
	return inboxSnapshot{root: root, sizes: inboxBlocks(t, root)}
}

// cut puts every INBOX block file back to its snapshot size (removing
// blocks made since) and removes the streams' state files, so that the
// server recovers from the blocks: what a power cut before the next fsync
// leaves. It returns the bytes cut.
func (s inboxSnapshot) cut(t *testing.T) int64 {
	t.Helper()
	var cut int64
	for path, size := range inboxBlocks(t, s.root) {
		was, ok := s.sizes[path]
		if !ok {
			was = 0
		}
		if size > was {
			cut += size - was
		}
		if !ok {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.Truncate(path, was); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(filepath.Dir(path), "index.db")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	return cut
}
