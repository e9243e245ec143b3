package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// A send is STORED and delivered live while every connection of the
// gateway's catch-up pool is held (what a login storm's summaries and
// archive pages do): the send path has a pool of its own (docs/design.md,
// "Postgres pools"). With one pool for every role the send waits for a
// connection that never comes, and the test fails.
func TestLiveSendWhileCatchupPoolIsHeld(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	got := liveReceiver(t, n, 2, "phone")
	sender := dial(t, n, "tcp", 1, "laptop")
	// Both logged in and caught up: a first message goes round.
	first, err := sender.Send(ctxT(t, 20*time.Second), conv, "before", "before the hold")
	if err != nil {
		t.Fatal(err)
	}
	waitMessage(t, got, first.MsgID)
	// A second conversation, not sent to yet: the gateway looks its
	// member count up (the send's price) while the hold lasts.
	conv2 := createConv(t, n, true, 1, 2) // a group: the direct one is unique per pair

	held := holdPool(t, n.Pools.Catchup.Pool)
	res, err := sender.Send(ctxT(t, 10*time.Second), conv2, "during", "while catch-up waits")
	if err != nil {
		t.Fatalf("send while the %d catch-up connections are held: %v", held, err)
	}
	waitMessage(t, got, res.MsgID)
	if s := n.Pools.Catchup.Pool.Stat(); s.AcquiredConns() != s.MaxConns() {
		t.Fatalf("catch-up pool: %d of %d connections acquired during the send, want all", s.AcquiredConns(), s.MaxConns())
	}
}

// holdPool acquires every connection of p until the test ends and returns
// how many that is.
func holdPool(t *testing.T, p *pgxpool.Pool) int {
	t.Helper()
	max := int(p.Config().MaxConns)
	for range max {
		c, err := p.Acquire(ctxT(t, 10*time.Second))
		if err != nil {
			t.Fatalf("hold the pool: %v", err)
		}
		t.Cleanup(c.Release)
	}
	return max
}

// liveReceiver logs uid's device in over WebSocket with a handler that
// puts every message handed over into the channel it returns.
func liveReceiver(t *testing.T, n *node.Node, uid int64, device string) <-chan client.Message {
	t.Helper()
	got := make(chan client.Message, 64)
	c, err := client.Dial(ctxT(t, 10*time.Second), client.Options{URL: n.Gateway.WSURL(), Token: testenv.Token(t, uid, device),
		Handler: func(m client.Message) error { got <- m; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return got
}

// waitMessage waits up to 10 s for msg_id id among got.
func waitMessage(t *testing.T, got <-chan client.Message, id int64) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-got:
			if m.MsgID == id {
				return
			}
		case <-deadline:
			t.Fatalf("message %d not delivered live within 10 s", id)
		}
	}
}

// Every pool of an all-in-one node is one application_name in
// pg_stat_activity (each opened a connection at start), so an operator
// sees which role class holds Postgres' connections.
func TestPoolsNamedInPgStatActivity(t *testing.T) {
	n := testnode.AllInOne(t)
	want := map[string]*pgxpool.Pool{"inboxd-send": n.Pools.Send.Pool, "inboxd-catchup": n.Pools.Catchup.Pool,
		"inboxd-background": n.Pools.Background.Pool, "inboxd-retention": n.Pools.Retention.Pool}
	for name, p := range want {
		// A connection of each pool, in use while it asks: it is the
		// pool's own and shows its name.
		var app string
		if err := p.QueryRow(ctxT(t, 10*time.Second), `SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()`).Scan(&app); err != nil {
			t.Fatal(err)
		}
		if app != name {
			t.Errorf("pool %s: application_name %q", name, app)
		}
	}
	rows, err := n.Store.Pool.Query(context.Background(),
		`SELECT DISTINCT application_name FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for rows.Next() {
		var app string
		if err := rows.Scan(&app); err != nil {
			t.Fatal(err)
		}
		seen[app] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("pg_stat_activity of the node's database has no %q: %v", name, seen)
		}
	}
}
