// Package testnode starts whole inboxd nodes for end-to-end tests.
package testnode

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
)

// Config returns a node configuration on free ports against databaseURL.
func Config(t testing.TB, databaseURL string) config.Config {
	c := config.Defaults()
	c.DatabaseURL = databaseURL
	c.HTTPAddr = "127.0.0.1:0"
	c.WSAddr = "127.0.0.1:0"
	c.TCPAddr = "127.0.0.1:0"
	c.NATSListen = "127.0.0.1:0"
	c.DataDir = t.TempDir()
	c.TokenSecret = testenv.Secret
	c.Layout = Layout()
	// Tests see a new device's whole inbox unless they test the window.
	c.NewDeviceMax = 1 << 30
	c.PullRate = 1000
	c.SendRate = 1e6      // tests send fast; TestSendRateLimited lowers it
	c.SendEntryRate = 1e9 // and to big groups; limits_test.go lowers it
	c.RequestRate = 1e6   // reads and summaries in loops; limits_test.go lowers it
	c.DeviceSeenEvery = 500 * time.Millisecond
	return c
}

// Layout is the stream layout of test nodes: 4 inbox and 4 send partitions.
func Layout() streams.Layout {
	l := streams.DefaultLayout
	l.InboxPartitions, l.SendPartitions = 4, 4
	return l
}

// StartNode starts a node with roles and stops it when the test ends.
func StartNode(t testing.TB, cfg config.Config, roles config.Role) *node.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg, roles, testenv.Logger(t))
	if err != nil {
		t.Fatalf("testenv: start node: %v", err)
	}
	t.Cleanup(n.Close)
	return n
}

// AllInOne starts an all-in-one node (embedded NATS, gateway, fanout,
// syncer) on a fresh database.
func AllInOne(t testing.TB) *node.Node {
	t.Helper()
	return StartNode(t, Config(t, testenv.Database(t)), config.RoleAllInOne)
}

// Admin connects to the node's NATS server as the admin user (what the nats
// CLI and inboxctl use); closed when the test ends.
func Admin(t testing.TB, n *node.Node) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(n.NC.ConnectedUrl(), nats.UserInfo(string(natsauth.Admin), natsauth.Password(natsauth.Admin)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Gateway starts one more gateway on n's NATS connection and database, with
// opts as given (free ports and the test Layout filled in when unset): for the gateway
// options the node configuration does not carry, such as the per-user
// backfill bucket. It has its own metrics registry and is shut down when
// the test ends.
func Gateway(t testing.TB, n *node.Node, opts gateway.Options) *gateway.Gateway {
	t.Helper()
	if opts.TCPAddr == "" {
		opts.TCPAddr = "127.0.0.1:0"
	}
	if opts.WSAddr == "" {
		opts.WSAddr = "127.0.0.1:0"
	}
	if opts.Layout == (streams.Layout{}) {
		opts.Layout = Layout()
	}
	// The node's pools when it has a gateway; else its first.
	st := n.Pools.Catchup
	if st == nil {
		st = n.Store
	}
	if opts.SendStore == nil {
		opts.SendStore = n.Pools.Send
	}
	g, err := gateway.New(opts, testenv.Logger(t).Named("gateway"), n.NC, st, testenv.Verifier(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("testnode: gateway: %v", err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatalf("testnode: start gateway: %v", err)
	}
	t.Cleanup(g.Shutdown)
	return g
}
