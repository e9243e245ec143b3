package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func createConv(t testing.TB, n *node.Node, group bool, members ...int64) int64 {
	t.Helper()
	r, err := (&admin.Client{NC: testnode.Admin(t, n)}).CreateConv(ctxT(t, 10*time.Second), admin.CreateConvRequest{Members: members, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	return r.ConvID
}

// dial connects a client for uid/device over ws ("ws") or tcp ("tcp").
func dial(t *testing.T, n *node.Node, transport string, uid int64, device string) *client.Client {
	t.Helper()
	url := n.Gateway.WSURL()
	if transport == "tcp" {
		url = "tcp://" + n.Gateway.TCPAddr()
	}
	c, err := client.Dial(ctxT(t, 10*time.Second), client.Options{URL: url, Token: testenv.Token(t, uid, device)})
	if err != nil {
		t.Fatalf("dial %s as %d/%s: %v", url, uid, device, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func count(t testing.TB, n *node.Node, sql string, args ...any) int {
	t.Helper()
	var c int
	if err := n.Store.Pool.QueryRow(context.Background(), sql, args...).Scan(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// metric reads a counter or gauge of the node from its /metrics endpoint
// (0 when it was never set).
func metric(t testing.TB, n *node.Node, name string) float64 {
	t.Helper()
	v, _ := metricValue(t, n, name)
	return v // not exported yet: a counter with labels appears at its first increment
}

// metricValue reads a counter or gauge of the node (summed over its
// labels) and whether /metrics exports it at all.
func metricValue(t testing.TB, n *node.Node, name string) (float64, bool) {
	t.Helper()
	v, found, err := readMetrics(n, name)
	if err != nil {
		t.Fatal(err)
	}
	return v[0], found[0]
}

// readMetrics reads counters or gauges of the node with one scrape of its
// /metrics endpoint, each summed over its labels, and whether each is
// exported at all. It never fails the test, so that a goroutine may call
// it.
func readMetrics(n *node.Node, names ...string) ([]float64, []bool, error) {
	resp, err := http.Get("http://" + n.Ops.Addr() + "/metrics")
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	sums, found := make([]float64, len(names)), make([]bool, len(names))
	for _, line := range strings.Split(string(b), "\n") {
		for i, name := range names {
			rest, ok := strings.CutPrefix(line, name)
			if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
				continue
			}
			if rest[0] == '{' { // one labelled series: the sum is the total
				_, rest, _ = strings.Cut(rest, "} ")
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				return nil, nil, fmt.Errorf("metric %s: %q: %w", name, line, err)
			}
			sums[i] += f
			found[i] = true
		}
	}
	return sums, found, nil
}

// waitArchived waits until the archiver copied at least n inbox entries
// (the fanout writes message entries into inbox_archive itself: the
// archiver's count says how far the archiver got).
func waitArchived(t testing.TB, n *node.Node, entries int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := int(metric(t, n, "inboxd_archive_entries_total"))
		if got >= entries {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("archive holds %d of %d entries", got, entries)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// writeUnannounced copies the inbox entry of msgID from uid from's inbox
// into uid to's, straight into the stream: an entry no live announcement
// carries (as a gateway reconnecting to NATS, or a dropped live entry,
// leaves). Its body is stored, so a page can hand it over.
func writeUnannounced(t *testing.T, admin *nats.Conn, from, to, msgID int64) {
	t.Helper()
	var entry streams.Entry
	for _, e := range testenv.InboxEntries(t, admin, testnode.Layout(), from) {
		if e.MsgID == msgID {
			entry = e.Entry
		}
	}
	body, err := entry.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	p := ids.Partition(to, testnode.Layout().InboxPartitions)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, entry.Msg(p, to, body, streams.MessageDedupeID(msgID, to))); err != nil {
		t.Fatal(err)
	}
}
