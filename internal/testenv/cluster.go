package testenv

import (
	"fmt"
	mrand "math/rand/v2"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/natsembed"
)

// ClusterSize is the number of servers StartCluster starts.
const ClusterSize = 3

// Cluster is three embedded nats-servers in the test process forming one
// NATS cluster with JetStream clustered over it, each on free loopback
// ports (client and route) with its store in a temp dir, and with the
// users of a real installation (internal/natsauth, every role with its
// password from natsauth.Password: the development defaults unless the
// environment sets them), so that services connect as they do in
// production. A server can be stopped and started again on the same store
// and ports, as a rebooted box.
type Cluster struct {
	t          testing.TB
	partitions int
	nodes      [ClusterSize]clusterNode
}

type clusterNode struct {
	name            string
	dir             string
	port, routePort int
	s               *server.Server // nil while stopped
}

// StartCluster starts the cluster for an installation of inboxPartitions
// INBOX partitions (the users' permissions name the streams) and waits
// until JetStream has a meta leader; it is shut down when the test ends.
func StartCluster(t testing.TB, inboxPartitions int) *Cluster {
	t.Helper()
	c := &Cluster{t: t, partitions: inboxPartitions}
	for i := range c.nodes {
		c.nodes[i] = clusterNode{name: "n" + strconv.Itoa(i+1), dir: t.TempDir(), port: StablePort(t), routePort: StablePort(t)}
	}
	t.Cleanup(func() {
		for i := range c.nodes {
			c.Stop(i)
		}
	})
	// A server waits for its routes; start them all, then wait for JetStream.
	errs := make(chan error, ClusterSize)
	for i := range c.nodes {
		go func() { errs <- c.start(i) }()
	}
	for range c.nodes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	c.WaitReady()
	return c
}

func (c *Cluster) start(i int) error {
	n := &c.nodes[i]
	var routes []string
	for j := range c.nodes {
		if j != i {
			routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(c.nodes[j].routePort))
		}
	}
	pw := map[natsauth.Role]string{natsauth.AllInOne: natsauth.Password(natsauth.AllInOne)}
	for _, r := range natsauth.Roles {
		pw[r] = natsauth.Password(r)
	}
	s, err := natsembed.Start(natsembed.Options{Port: n.port, StoreDir: n.dir, Name: n.name,
		ClusterListen: "127.0.0.1:" + strconv.Itoa(n.routePort), Routes: routes,
		Users: natsauth.Users(pw, c.partitions)})
	if err != nil {
		return fmt.Errorf("testenv: cluster server %s: %w", n.name, err)
	}
	n.s = s
	return nil
}

// StablePort returns a loopback TCP port that was free a moment ago,
// below the kernel's ephemeral range (32768-60999 here): a server stopped
// and started again on it finds it free, where a port from FreePort may
// meanwhile be the source port of any outgoing connection on the box
// (seen: a restart failing with the port in use).
func StablePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		p := 20000 + mrand.IntN(12000)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		return p
	}
	t.Fatal("testenv: no free port in 20000..31999")
	return 0
}

// URL is server i's client URL.
func (c *Cluster) URL(i int) string { return "nats://127.0.0.1:" + strconv.Itoa(c.nodes[i].port) }

// URLs is every server's client URL, comma-separated (a --nats value:
// clients fail over between them).
func (c *Cluster) URLs() string {
	var u []string
	for i := range c.nodes {
		u = append(u, c.URL(i))
	}
	return strings.Join(u, ",")
}

// Name is server i's server name (n1, n2, n3).
func (c *Cluster) Name(i int) string { return c.nodes[i].name }

// Server is server i, nil while it is stopped.
func (c *Cluster) Server(i int) *server.Server { return c.nodes[i].s }

// Connect connects to every server of the cluster as role (natsauth) with
// its password, reconnecting forever; the connection is closed when the
// test ends.
func (c *Cluster) Connect(role natsauth.Role) *nats.Conn {
	c.t.Helper()
	nc, err := nats.Connect(c.URLs(), nats.UserInfo(string(role), natsauth.Password(role)),
		nats.CustomInboxPrefix(natsauth.InboxPrefix(role)), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		c.t.Fatalf("testenv: connect to the cluster as %s: %v", role, err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

// Stop shuts server i down (its clients reconnect to the others); its
// store stays for Restart. Stopping a stopped server does nothing.
func (c *Cluster) Stop(i int) {
	if s := c.nodes[i].s; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.nodes[i].s = nil
	}
}

// Restart starts server i again on its store and ports (after Stop) and
// waits until JetStream is current on it.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	c.Stop(i)
	if err := c.start(i); err != nil {
		c.t.Fatal(err)
	}
	c.WaitReady()
}

// WaitReady waits until the running servers agree on a JetStream meta
// leader and each of them is current with it.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, current := false, true
		for _, n := range c.nodes {
			if n.s == nil {
				continue
			}
			leader = leader || n.s.JetStreamIsLeader()
			current = current && n.s.JetStreamIsCurrent()
		}
		if leader && current {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("testenv: cluster has no JetStream meta leader after 30s (leader %v, all current %v)", leader, current)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// account is the account inboxd's users live in (no accounts configured).
const account = server.DEFAULT_GLOBAL_ACCOUNT

// StreamLeader returns the index of the running server leading stream, or
// -1 when none does (yet).
func (c *Cluster) StreamLeader(stream string) int {
	for i, n := range c.nodes {
		if n.s != nil && n.s.JetStreamIsStreamLeader(account, stream) {
			return i
		}
	}
	return -1
}

// ConsumerLeader returns the index of the running server leading (for an
// R1 consumer: holding) consumer on stream, or -1 when none does.
func (c *Cluster) ConsumerLeader(stream, consumer string) int {
	for i, n := range c.nodes {
		if n.s != nil && n.s.JetStreamIsConsumerLeader(account, stream, consumer) {
			return i
		}
	}
	return -1
}

// WaitStreamLeader waits until a running server leads stream and returns
// its index.
func (c *Cluster) WaitStreamLeader(stream string) int {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if i := c.StreamLeader(stream); i >= 0 {
			return i
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("testenv: no leader of stream %s after 30s", stream)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
