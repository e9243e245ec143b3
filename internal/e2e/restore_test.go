package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// Postgres restored to an earlier point than the INBOX streams (a backup of
// last night, a point-in-time recovery) has conversation.last_seq back
// where it was: the fanout would hand out conv_seqs the devices hold
// already, and a client's order buffer would take the new messages for
// repeats and drop them. Modelled on a real node: 10 messages, the
// database copied (CREATE DATABASE … TEMPLATE, the node stopped: a
// consistent backup), 20 more messages, the node stopped, the copy put in
// the database's place, the node started on it with its streams. The next
// messages get conv_seqs above the 30 the streams know, the device that
// had all 30 gets them, and the entries of the 20 messages whose rows the restore
// lost are counted.
func TestPostgresRestoreHandsOutNoConvSeqTwice(t *testing.T) {
	url := testenv.Database(t)
	cfg := testnode.Config(t, url)
	n := testnode.StartNode(t, cfg, config.RoleAllInOne)
	conv := createConv(t, n, false, 1, 2)
	a := connectDevice(t, n, 2, "a", deviceOpts{})
	sendN(t, n, 1, conv, 10, "before")
	a.waitFor(10, 20*time.Second)
	a.close()
	n.Close()
	backup := copyDatabase(t, url)

	n = testnode.StartNode(t, cfg, config.RoleAllInOne)
	a = connectDevice(t, n, 2, "a", deviceOpts{})
	sendN(t, n, 1, conv, 20, "lost")
	a.waitFor(20, 20*time.Second)
	a.close()
	n.Close()
	restoreDatabase(t, url, backup)

	n = testnode.StartNode(t, cfg, config.RoleAllInOne)
	c, err := client.Dial(ctxT(t, 20*time.Second), client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, 1, "sender-after")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var after []int64
	for i := range 5 {
		r, err := c.Send(ctxT(t, 30*time.Second), conv, fmt.Sprintf("after-%d", i), "after the restore")
		if err != nil {
			t.Fatal(err)
		}
		if r.ConvSeq <= 30 {
			t.Errorf("after the restore a message got conv_seq %d: the streams hold conv_seqs up to 30 already", r.ConvSeq)
		}
		after = append(after, r.MsgID)
	}
	a = connectDevice(t, n, 2, "a", deviceOpts{})
	got := map[int64]bool{}
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < len(after) && time.Now().Before(deadline) {
		for _, m := range a.messages() {
			got[m.MsgID] = true
		}
		time.Sleep(50 * time.Millisecond) // polls the device's state
	}
	for _, id := range after {
		if !got[id] {
			t.Errorf("device a never got msg %d sent after the restore (has %d messages)", id, len(a.messages()))
		}
	}
	if m := metric(t, n, "inboxd_archive_entries_without_message_total"); m != 40 {
		t.Errorf("inboxd_archive_entries_without_message_total = %v, want the entries (two members) of the 20 messages the restore lost", m)
	}
	if r := metric(t, n, "inboxd_archive_conv_seq_raised_total"); r < 1 {
		t.Errorf("inboxd_archive_conv_seq_raised_total = %v, want at least 1", r)
	}
}

// copyDatabase copies the database of url (nobody connected to it) into a
// new one and returns its name.
func copyDatabase(t *testing.T, url string) string {
	t.Helper()
	db := databaseOf(t, url)
	name := db + "_backup"
	adminExec(t, "CREATE DATABASE "+name+" TEMPLATE "+db)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), testenv.AdminURL())
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(context.Background())
		}
	})
	return name
}

// restoreDatabase puts the copy backup in the place of url's database.
func restoreDatabase(t *testing.T, url, backup string) {
	t.Helper()
	db := databaseOf(t, url)
	adminExec(t, "DROP DATABASE "+db+" WITH (FORCE)", "ALTER DATABASE "+backup+" RENAME TO "+db)
}

func databaseOf(t *testing.T, url string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Database
}

// adminExec runs statements as the tests' Postgres admin, in order.
func adminExec(t *testing.T, statements ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range statements {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}
