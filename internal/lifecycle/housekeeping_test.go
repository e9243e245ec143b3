package lifecycle_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/lifecycle"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// metric reads a counter or gauge of the node, the series whose labels
// contain label ("" : the sum of all).
func metric(t testing.TB, n *node.Node, name, label string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.Ops.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') || !strings.Contains(rest, label) {
			continue
		}
		if rest[0] == '{' {
			_, rest, _ = strings.Cut(rest, "} ")
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			t.Fatalf("metric %s: %q: %v", name, line, err)
		}
		sum += f
	}
	return sum
}

// The syncer's background housekeeping, every --housekeeping-every:
// device_cursor rows of devices unseen longer than --device-forget go with
// their consumers, consumers of devices unseen longer than --device-reap
// (and an hour) that the server did not reap go while their rows stay,
// send_reject rows older than --reject-horizon go; recent rows and
// consumers stay; the metrics count what went, in batches smaller than
// the work.
func TestHousekeepingRemovesOldRowsAndKeepsRecentOnes(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.HousekeepingEvery = 300 * time.Millisecond
	n := startNode(t, cfg)
	lifecycle.SetTestHooks(n.Lifecycle, nil, 0, 2) // batches of 2 rows
	ctx := ctxT(t, 60*time.Second)
	js, err := jetstream.New(testnode.Admin(t, n.Node))
	if err != nil {
		t.Fatal(err)
	}
	l := testnode.Layout()
	// Devices of uid 1..5, each with a consumer and a row last seen:
	// 100 days ago (forgotten), 95 days ago (forgotten), 80 days ago
	// (kept, its consumer was not reaped: deleted), an hour ago and now
	// (kept with their consumers).
	seen := map[int64]time.Duration{1: 100 * 24 * time.Hour, 2: 95 * 24 * time.Hour, 3: 80 * 24 * time.Hour, 4: time.Hour, 5: 0}
	for uid, ago := range seen {
		p := ids.Partition(uid, l.InboxPartitions)
		cc, err := streams.DeviceConsumerConfig(p, uid, "phone", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := js.CreateOrUpdateConsumer(ctx, streams.InboxStream(p), cc); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Store.Pool.Exec(ctx, `
			INSERT INTO device_cursor (uid, device, consumer, ack_seq, updated_at, last_seen_at)
			VALUES ($1, 'phone', $2, 7, now() - $3::interval, now() - $3::interval)`, uid, cc.Durable, ago.String()); err != nil {
			t.Fatal(err)
		}
	}
	// send_reject rows: five 40 days old, two of today.
	for i := 0; i < 7; i++ {
		age := "40 days"
		if i >= 5 {
			age = "1 minute"
		}
		if _, err := n.Store.Pool.Exec(ctx, `
			INSERT INTO send_reject (sender_uid, client_msg_id, code, message, created_at)
			VALUES (9, $1, 5, 'not a member', now() - $2::interval)`, "c-"+strconv.Itoa(i), age); err != nil {
			t.Fatal(err)
		}
	}

	waitFor(t, 30*time.Second, "housekeeping removed the old rows", func() bool {
		return count(t, n.Node, `SELECT count(*) FROM send_reject`) == 2 && count(t, n.Node, `SELECT count(*) FROM device_cursor`) == 3 &&
			metric(t, n.Node, "inboxd_housekeeping_consumers_removed_total", `reason="unreaped"`) == 1
	})
	var rows []int64
	r, err := n.Store.Pool.Query(ctx, `SELECT uid FROM device_cursor ORDER BY uid`)
	if err != nil {
		t.Fatal(err)
	}
	for r.Next() {
		var u int64
		_ = r.Scan(&u)
		rows = append(rows, u)
	}
	if len(rows) != 3 || rows[0] != 3 || rows[1] != 4 || rows[2] != 5 {
		t.Fatalf("device_cursor rows of uids %v left, want 3, 4, 5", rows)
	}
	if c := count(t, n.Node, `SELECT count(*) FROM send_reject WHERE created_at > now() - interval '1 hour'`); c != 2 {
		t.Fatalf("%d recent send_reject rows left, want 2", c)
	}
	for uid := range seen {
		p := ids.Partition(uid, l.InboxPartitions)
		_, err := js.Consumer(ctx, streams.InboxStream(p), streams.DeviceConsumer(uid, "phone"))
		gone := errors.Is(err, jetstream.ErrConsumerNotFound)
		if want := uid <= 3; gone != want {
			t.Errorf("uid %d (unseen %s): consumer gone %v, want %v (%v)", uid, seen[uid], gone, want, err)
		}
	}
	for _, c := range []struct {
		name, label string
		want        float64
	}{
		{"inboxd_housekeeping_rows_removed_total", `table="device_cursor"`, 2},
		{"inboxd_housekeeping_rows_removed_total", `table="send_reject"`, 5},
		{"inboxd_housekeeping_consumers_removed_total", `reason="forgotten"`, 2},
		{"inboxd_housekeeping_consumers_removed_total", `reason="unreaped"`, 1},
	} {
		if got := metric(t, n.Node, c.name, c.label); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.label, got, c.want)
		}
	}
	for _, table := range []string{"device_cursor", "send_reject"} {
		if b := metric(t, n.Node, "inboxd_housekeeping_bytes_freed_total", `table="`+table+`"`); b <= 0 {
			t.Errorf("bytes freed of %s: %v", table, b)
		}
	}
	if metric(t, n.Node, "inboxd_housekeeping_last_run_timestamp_seconds", "") < float64(time.Now().Add(-time.Minute).Unix()) {
		t.Error("inboxd_housekeeping_last_run_timestamp_seconds is not recent")
	}

	// Another pass finds nothing more to remove.
	rep, err := n.Lifecycle.Housekeep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Skipped && (rep.Devices != 0 || rep.Rejects != 0 || rep.Forgotten != 0 || rep.Unreaped != 0) {
		t.Fatalf("a second pass removed %+v", rep)
	}
}
