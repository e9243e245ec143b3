package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// clusterInstall is an installation on testenv's 3-node NATS cluster with
// R3 streams: one node with the gateway, fanout and syncer roles,
// connected to every server.
func clusterInstall(t *testing.T) (*testenv.Cluster, *node.Node) {
	t.Helper()
	c := testenv.StartCluster(t, testnode.Layout().InboxPartitions)
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.NATSURL = c.URLs()
	cfg.Replicas = 3
	return c, testnode.StartNode(t, cfg, config.RoleAllInOne&^config.RoleEmbeddedNATS)
}

// consumerServer returns the server holding uid/device's consumer (R1).
func consumerServer(t *testing.T, c *testenv.Cluster, uid int64, device string) int {
	t.Helper()
	stream := streams.InboxStream(ids.Partition(uid, testnode.Layout().InboxPartitions))
	name := streams.DeviceConsumer(uid, device)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if i := c.ConsumerLeader(stream, name); i >= 0 {
			return i
		}
		if time.Now().After(deadline) {
			t.Fatalf("no server holds consumer %s on %s", name, stream)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitAll waits until d holds every one of want (duplicates allowed: the
// client dedupes what a recreated cursor repeats).
func waitAll(t *testing.T, d *device, want []int64, within time.Duration, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		seen := map[int64]bool{}
		for _, m := range d.messages() {
			seen[m.MsgID] = true
		}
		missing := 0
		for _, id := range want {
			if !seen[id] {
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d messages never arrived within %s", what, missing, len(want), within)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A device's consumer is R1 and lives on one NATS server. When that server
// is down, the device's next login recreates its cursor on a running
// server at the mirrored position: it receives everything sent after its
// last confirmation (sent while the server was down), nothing skipped;
// and it goes on receiving once the server is back.
func TestDeviceLoginWhileItsConsumerServerIsDown(t *testing.T) {
	c, n := clusterInstall(t)
	conv := createConv(t, n, false, 1, 2)
	d := connectDevice(t, n, 2, "phone", deviceOpts{})
	first := sendN(t, n, 1, conv, 20, "before")
	d.waitFor(len(first), 30*time.Second)
	checkOrderedOnce(t, d.messages(), first)
	d.close()

	down := consumerServer(t, c, 2, "phone")
	c.Stop(down)
	t.Logf("stopped %s, which held the consumer", c.Name(down))
	while := sendN(t, n, 1, conv, 20, "while-down")

	d = connectDevice(t, n, 2, "phone", deviceOpts{})
	waitAll(t, d, while, 30*time.Second, "login while the consumer's server is down")

	c.Restart(down)
	after := sendN(t, n, 1, conv, 5, "after")
	waitAll(t, d, after, 30*time.Second, "after the restart of "+c.Name(down))
}

// A connected device whose consumer's server dies keeps its session: live
// entries still come, and the entries only its consumer delivers (here one
// written to its inbox without a live announcement, as a gateway
// reconnecting to NATS misses some) arrive too, from the cursor recreated
// on a running server.
func TestConnectedDeviceRecoversWhenItsConsumerServerDies(t *testing.T) {
	c, n := clusterInstall(t)
	conv := createConv(t, n, false, 1, 2)
	other := createConv(t, n, false, 1, 3)
	d := connectDevice(t, n, 2, "phone", deviceOpts{})
	first := sendN(t, n, 1, conv, 10, "before")
	d.waitFor(len(first), 30*time.Second)

	down := consumerServer(t, c, 2, "phone")
	c.Stop(down)
	t.Logf("stopped %s, which held the consumer", c.Name(down))

	// An entry no live announcement carries: a copy of a message of
	// another conversation (its body is stored) written straight into
	// uid 2's inbox.
	hidden := sendN(t, n, 1, other, 1, "hidden")
	admin := c.Connect(natsauth.Admin)
	writeUnannounced(t, admin, 3, 2, hidden[0])

	live := sendN(t, n, 1, conv, 10, "after") // live, and a poke of the backfill
	waitAll(t, d, live, 30*time.Second, "live entries after the consumer's server died")
	waitAll(t, d, hidden, 30*time.Second, "the entry only the consumer delivers")

	c.Restart(down)
	more := sendN(t, n, 1, conv, 5, "restarted")
	waitAll(t, d, more, 30*time.Second, "after the restart of "+c.Name(down))
}

// Device consumers are memory consumers (jetstream/consumers/
// INBOX_device.json: no files, a restart of the server in milliseconds
// instead of minutes with many devices): a restarted single NATS server
// has none left. A connected device recreates its cursor from its session
// and an offline one from the mirror at its next login: both receive
// everything sent after their last confirmation, nothing skipped.
func TestDevicesResumeAfterNATSRestartLosesTheirConsumers(t *testing.T) {
	ns := testenv.StartNATS(t)
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.NATSURL = ns.URL()
	n := testnode.StartNode(t, cfg, config.RoleAllInOne&^config.RoleEmbeddedNATS)
	conv := createConv(t, n, false, 1, 2)
	online := connectDevice(t, n, 2, "desk", deviceOpts{})
	offline := connectDevice(t, n, 2, "phone", deviceOpts{})
	first := sendN(t, n, 1, conv, 10, "before")
	online.waitFor(len(first), 30*time.Second)
	offline.waitFor(len(first), 30*time.Second)
	offline.close()
	time.Sleep(1500 * time.Millisecond) // the mirror's flush of the closed session's cursor

	ns.Stop()
	ns.Start()
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	p := ids.Partition(2, testnode.Layout().InboxPartitions)
	if _, err := js.Consumer(context.Background(), streams.InboxStream(p), streams.DeviceConsumer(2, "phone")); err == nil {
		t.Fatal("the offline device's consumer survived the restart: not a memory consumer")
	}
	after := sendN(t, n, 1, conv, 10, "after")
	waitAll(t, online, after, 30*time.Second, "connected device after the NATS restart")
	offline = connectDevice(t, n, 2, "phone", deviceOpts{})
	waitAll(t, offline, after, 30*time.Second, "offline device's login after the NATS restart")
}
