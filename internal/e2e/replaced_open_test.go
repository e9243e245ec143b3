package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire/pb"
)

// A login whose device consumer cannot be opened (its NATS node is gone:
// the link is a black hole) is replaced by the device's next login (the
// client gave up and retried); when the first login's open then fails,
// the gateway refuses that login and serves on. Found on a 3-node
// cluster with a node killed (SIGKILL): the gateway process panicked with
// "close of closed channel" (session.go, startSession), dropping every
// connection it held.
func TestLoginReplacedWhileItsConsumerOpens(t *testing.T) {
	db := testenv.Database(t)
	natsNode := testnode.StartNode(t, testnode.Config(t, db), config.RoleEmbeddedNATS)
	natsAddr := strings.TrimPrefix(natsNode.NATS.ClientURL(), "nats://")
	cfg := testnode.Config(t, db)
	cfg.NATSURL = "nats://" + natsAddr
	testnode.StartNode(t, cfg, config.RoleSyncer)
	proxy := testenv.StartProxy(t, natsAddr)
	gcfg := testnode.Config(t, db)
	gcfg.NATSURL = "nats://" + proxy.Addr()
	gw := testnode.StartNode(t, gcfg, config.RoleGateway)

	// Another user's session, which must outlive what follows.
	other := dialRaw(t, gw.Gateway.TCPAddr())
	other.hello(2)

	proxy.Blackhole(true)
	first := dialRaw(t, gw.Gateway.TCPAddr())
	first.write(&pb.Hello{Token: testenv.Token(t, 1, "raw"), DeviceKind: "desktop"})
	time.Sleep(time.Second) // the first login waits for its consumer
	second := dialRaw(t, gw.Gateway.TCPAddr())
	second.write(&pb.Hello{Token: testenv.Token(t, 1, "raw"), DeviceKind: "desktop"})
	first.expectError(pb.ErrorCode_SESSION_REPLACED, true)
	// The first login's open gives up (10 s) while the link is still dead.
	time.Sleep(11 * time.Second)
	proxy.Blackhole(false)

	// The gateway still serves: the other session is open, a new login
	// of the device is welcomed.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := dialRaw(t, gw.Gateway.TCPAddr())
		r.write(&pb.Hello{Token: testenv.Token(t, 1, "raw"), DeviceKind: "desktop"})
		m := r.read()
		if _, ok := m.(*pb.Welcome); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no welcome after the link came back: %v", m)
		}
		time.Sleep(500 * time.Millisecond)
	}
	other.write(&pb.Ping{})
	if m := other.read(); m == nil {
		t.Fatal("the other user's session was closed")
	}
}
