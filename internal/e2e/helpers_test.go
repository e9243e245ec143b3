package e2e

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/node"
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
	resp, err := http.Get("http://" + n.Ops.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0 // not exported yet: a counter with labels appears at its first increment
}

// waitArchived waits until the archiver copied at least n inbox entries.
func waitArchived(t testing.TB, n *node.Node, entries int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := count(t, n, `SELECT count(*) FROM inbox_archive`)
		if got >= entries {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("archive holds %d of %d entries", got, entries)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
