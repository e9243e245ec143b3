package natsembed_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/inboxd/inboxd/internal/natsembed"
	"github.com/inboxd/inboxd/internal/testenv"
)

// The route port asks for the cluster's password: a server that does not
// know it does not join (no message crosses, either way, however long
// they try); one that does, does. Messages, not the route count, are
// what is checked for the intruder: a server that dials a peer counts
// the route from the peer's INFO until the peer refuses its CONNECT, so
// a count taken at a chosen moment may see that instant (a CI run did).
func TestRoutesNeedTheClusterPassword(t *testing.T) {
	aRoute, bRoute := testenv.FreePort(t), testenv.FreePort(t)
	start := func(name string, route, peer int, password string) *server.Server {
		s, err := natsembed.Start(natsembed.Options{Port: testenv.FreePort(t), StoreDir: t.TempDir(), Name: name,
			ClusterListen: "127.0.0.1:" + strconv.Itoa(route), ClusterUser: "inboxd-route", ClusterPassword: password,
			Routes: []string{"nats://127.0.0.1:" + strconv.Itoa(peer)}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	connect := func(s *server.Server) *nats.Conn {
		nc, err := nats.Connect(s.ClientURL())
		if err != nil {
			t.Fatal(err)
		}
		return nc
	}
	a := start("a", aRoute, bRoute, "right")
	defer a.Shutdown()
	na := connect(a)
	defer na.Close()
	fromA, err := na.SubscribeSync("to.a")
	if err != nil {
		t.Fatal(err)
	}

	// crosses publishes on one server, every 50 ms until wait is over,
	// what a subscriber of the other server waits for, and reports
	// whether it arrived.
	crosses := func(pub *nats.Conn, subject string, sub *nats.Subscription, wait time.Duration) bool {
		deadline := time.Now().Add(wait)
		for time.Now().Before(deadline) {
			if err := pub.Publish(subject, []byte("hello")); err != nil {
				t.Fatal(err)
			}
			if _, err := sub.NextMsg(50 * time.Millisecond); err == nil {
				return true
			}
		}
		return false
	}

	intruder := start("intruder", bRoute, aRoute, "wrong")
	ni := connect(intruder)
	fromI, err := ni.SubscribeSync("to.intruder")
	if err != nil {
		t.Fatal(err)
	}
	if crosses(na, "to.intruder", fromI, 1500*time.Millisecond) || crosses(ni, "to.a", fromA, 1500*time.Millisecond) {
		t.Fatalf("a server with a wrong cluster password exchanged messages with the cluster (routes: %d)", a.NumRoutes())
	}
	ni.Close()
	intruder.Shutdown()

	b := start("b", bRoute, aRoute, "right")
	defer b.Shutdown()
	nb := connect(b)
	defer nb.Close()
	fromB, err := nb.SubscribeSync("to.b")
	if err != nil {
		t.Fatal(err)
	}
	if !crosses(na, "to.b", fromB, 10*time.Second) || !crosses(nb, "to.a", fromA, 10*time.Second) {
		t.Fatalf("a server with the cluster password does not exchange messages with the cluster (routes: %d)", a.NumRoutes())
	}
}
