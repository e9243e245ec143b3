package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/lease"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// natsCall is one row of the permission table: a real NATS operation by a
// service user, and whether the server lets it through.
type natsCall struct {
	role    natsauth.Role
	what    string
	kind    string // "req": a request (JetStream API, JetStream publish), "pub": a publish, "sub": a subscription
	subject string
	body    any // marshalled to JSON unless []byte
	allowed bool
}

// Each service's NATS user of a split deployment (the users of
// internal/natsauth on a real embedded server, inboxd --nats-only) may make
// the calls its role makes and nothing else: another role's replies,
// stream updates, deletes and purges, consumers on streams it does not use
// or that belong to another role are refused by the server; the calls it
// needs are answered by JetStream.
func TestNATSUsersHaveLeastPrivilege(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	n := testnode.StartNode(t, cfg, config.RoleEmbeddedNATS) // --nats-only: one user per service
	url := n.NATS.ClientURL()
	if _, err := nats.Connect(url); err == nil {
		t.Fatal("an anonymous client got in")
	}
	if _, err := nats.Connect(url, nats.UserInfo("gateway", "wrong")); err == nil {
		t.Fatal("a wrong password got in")
	}
	// What the syncer and the services would have created: the streams,
	// the fanout's and the archiver's consumers, one device's cursor.
	l := cfg.Layout
	adm, err := nats.Connect(url, nats.UserInfo(string(natsauth.Admin), natsauth.Password(natsauth.Admin)))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	js, err := jetstream.New(adm)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 30*time.Second)
	if err := streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, streams.DefaultReplicas); err != nil {
		t.Fatal(err)
	}
	if _, err := streams.EnsureFanoutConsumers(ctx, js, l); err != nil {
		t.Fatal(err)
	}
	archCfg, err := streams.ArchiverConsumerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "INBOX_0", archCfg); err != nil {
		t.Fatal(err)
	}
	if _, err := lease.EnsureBucket(ctx, js, 1, lease.DefaultTiming); err != nil {
		t.Fatal(err)
	}
	dev7, _ := streams.DeviceConsumerConfig(0, 7, "phone", 0, 0)
	if _, err := js.CreateOrUpdateConsumer(ctx, "INBOX_0", dev7); err != nil {
		t.Fatal(err)
	}
	dev8, _ := streams.DeviceConsumerConfig(0, 8, "tablet", 0, 0)
	dev9, _ := streams.DeviceConsumerConfig(0, 9, "laptop", 0, 0) // the gateway deletes it
	if _, err := js.CreateOrUpdateConsumer(ctx, "INBOX_0", dev9); err != nil {
		t.Fatal(err)
	}
	fan0, _ := streams.FanoutConsumerConfig(0)
	inbox0, _ := streams.InboxStreamConfig(l, 0)
	create := func(cc jetstream.ConsumerConfig, action string) any {
		return map[string]any{"stream_name": "INBOX_0", "config": cc, "action": action}
	}
	d7 := dev7.Durable
	next := map[string]any{"batch": 1, "no_wait": true}
	const (
		gw, fo, sy = natsauth.Gateway, natsauth.Fanout, natsauth.Syncer
	)
	calls := []natsCall{
		// The gateway: device consumers on INBOX_<p>, direct get, sends.
		{gw, "stream info", "req", "$JS.API.STREAM.INFO.INBOX_0", nil, true},
		{gw, "create a device consumer", "req", "$JS.API.CONSUMER.CREATE.INBOX_0." + dev8.Durable + ".inbox.0.8", map[string]any{"stream_name": "INBOX_0", "config": dev8, "action": "create"}, true},
		{gw, "device consumer info", "req", "$JS.API.CONSUMER.INFO.INBOX_0." + d7, nil, true},
		{gw, "pull from a device consumer", "req", "$JS.API.CONSUMER.MSG.NEXT.INBOX_0." + d7, next, true},
		{gw, "reset a device consumer", "req", "$JS.API.CONSUMER.RESET.INBOX_0." + d7, nil, true},
		{gw, "direct get of a user's newest entry", "req", "$JS.API.DIRECT.GET.INBOX_0.inbox.0.7", nil, true},
		{gw, "publish a send", "req", "send.0.1", []byte("x"), true},
		{gw, "publish a receipt entry", "req", "inbox.0.7", []byte("x"), true},
		{gw, "ack a device delivery", "pub", "$JS.ACK.INBOX_0." + d7 + ".1.1.1.0.0", []byte("+ACK"), true},
		{gw, "subscribe to its reply prefix", "sub", natsauth.InboxPrefix(gw) + ".x", nil, true},
		{gw, "subscribe to its send results", "sub", "_INBOXD.gw.abc.*", nil, true},
		{gw, "subscribe to a user's live and kick subjects", "sub", "inboxd.u.0.7.*", nil, true},
		{gw, "subscribe to membership changes", "sub", "inboxd.event.conv.changed", nil, true},
		{gw, "subscribe to erased bodies", "sub", "inboxd.event.bodies.erased", nil, true},
		{gw, "list consumers", "req", "$JS.API.CONSUMER.NAMES.INBOX_0", nil, false},
		{gw, "subscribe to the fanout's replies", "sub", natsauth.InboxPrefix(fo) + ".>", nil, false},
		{gw, "subscribe to the syncer's replies", "sub", natsauth.InboxPrefix(sy) + ".>", nil, false},
		{gw, "subscribe to every reply (_INBOX.>)", "sub", "_INBOX.>", nil, false},
		{gw, "update a stream", "req", "$JS.API.STREAM.UPDATE.INBOX_0", inbox0, false},
		{gw, "create a stream", "req", "$JS.API.STREAM.CREATE.OTHER", map[string]any{"name": "OTHER"}, false},
		{gw, "delete a stream", "req", "$JS.API.STREAM.DELETE.INBOX_0", nil, false},
		{gw, "purge a stream", "req", "$JS.API.STREAM.PURGE.INBOX_0", nil, false},
		{gw, "delete the archiver", "req", "$JS.API.CONSUMER.DELETE.INBOX_0.archiver", nil, false},
		{gw, "create a consumer on SEND", "req", "$JS.API.CONSUMER.CREATE.SEND.x.send.0.*", nil, false},
		{gw, "create an unfiltered consumer", "req", "$JS.API.CONSUMER.CREATE.INBOX_0.x", nil, false},
		{gw, "create a consumer of another partition's users", "req", "$JS.API.CONSUMER.CREATE.INBOX_0.x.inbox.1.5", nil, false},
		{gw, "reset the archiver", "req", "$JS.API.CONSUMER.RESET.INBOX_0.archiver", nil, false},
		{gw, "pull from the archiver", "req", "$JS.API.CONSUMER.MSG.NEXT.INBOX_0.archiver", next, false},
		{gw, "update the archiver", "req", "$JS.API.CONSUMER.CREATE.INBOX_0.archiver.inbox.0.7", nil, false},
		{gw, "ack for the archiver", "pub", "$JS.ACK.INBOX_0.archiver.1.1.1.0.0", []byte("+ACK"), false},
		{gw, "call the admin API", "req", "inboxd.admin.conv.create", nil, false},
		{gw, "subscribe to the admin API", "sub", "inboxd.admin.>", nil, false},

		// The fanout: its consumers on SEND; inbox entries, live, results.
		{fo, "stream info", "req", "$JS.API.STREAM.INFO.SEND", nil, true},
		{fo, "create or update its consumer", "req", "$JS.API.CONSUMER.CREATE.SEND.fanout_0.send.0.*", map[string]any{"stream_name": "SEND", "config": fan0}, true},
		{fo, "its consumer's info", "req", "$JS.API.CONSUMER.INFO.SEND.fanout_0", nil, true},
		{fo, "pull sends", "req", "$JS.API.CONSUMER.MSG.NEXT.SEND.fanout_0", map[string]any{"batch": 1, "no_wait": true, "group": streams.FanoutGroup}, true},
		{fo, "reset its consumer", "req", "$JS.API.CONSUMER.RESET.SEND.fanout_0", nil, true},
		{fo, "publish an inbox entry", "req", "inbox.0.7", []byte("x"), true},
		{fo, "announce a live entry", "pub", "inboxd.u.0.7.live", []byte("x"), true},
		{fo, "answer a gateway", "pub", "_INBOXD.gw.abc.1", []byte("x"), true},
		{fo, "ack a send", "pub", "$JS.ACK.SEND.fanout_0.1.1.1.0.0", []byte("+ACK"), true},
		{fo, "subscribe to its reply prefix", "sub", natsauth.InboxPrefix(fo) + ".x", nil, true},
		{fo, "subscribe to the gateway's replies", "sub", natsauth.InboxPrefix(gw) + ".>", nil, false},
		{fo, "subscribe to every reply (_INBOX.>)", "sub", "_INBOX.>", nil, false},
		{fo, "update a stream", "req", "$JS.API.STREAM.UPDATE.SEND", nil, false},
		{fo, "delete a stream", "req", "$JS.API.STREAM.DELETE.SEND", nil, false},
		{fo, "purge a stream", "req", "$JS.API.STREAM.PURGE.SEND", nil, false},
		{fo, "delete a consumer", "req", "$JS.API.CONSUMER.DELETE.SEND.fanout_0", nil, false},
		{fo, "create a consumer on INBOX_0", "req", "$JS.API.CONSUMER.CREATE.INBOX_0.x.inbox.0.7", nil, false},
		{fo, "read a device consumer", "req", "$JS.API.CONSUMER.INFO.INBOX_0." + d7, nil, false},
		{fo, "publish a send", "req", "send.0.1", []byte("x"), false},
		{fo, "subscribe to a user's subjects", "sub", "inboxd.u.0.7.*", nil, false},

		// The syncer: the streams, the archiver, the admin API.
		{sy, "stream info", "req", "$JS.API.STREAM.INFO.SEND", nil, true},
		{sy, "update a stream", "req", "$JS.API.STREAM.UPDATE.INBOX_0", inbox0, true},
		{sy, "create or update the archiver", "req", "$JS.API.CONSUMER.CREATE.INBOX_0.archiver", create(archCfg, ""), true},
		{sy, "pull for the archiver", "req", "$JS.API.CONSUMER.MSG.NEXT.INBOX_0.archiver", map[string]any{"batch": 1, "no_wait": true, "group": streams.ArchiverGroup}, true},
		{sy, "reset the archiver", "req", "$JS.API.CONSUMER.RESET.INBOX_0.archiver", nil, true},
		{sy, "read a device cursor", "req", "$JS.API.CONSUMER.INFO.INBOX_0." + d7, nil, true},
		{sy, "ack for the archiver", "pub", "$JS.ACK.INBOX_0.archiver.1.1.1.0.0", []byte("+ACK"), true},
		{sy, "announce a membership change", "pub", "inboxd.event.conv.changed", []byte("1"), true},
		{sy, "revoke a user's sessions", "pub", "inboxd.u.0.7.kick", []byte("x"), true},
		{sy, "serve the admin API", "sub", "inboxd.admin.>", nil, true},
		{sy, "serve micro discovery", "sub", "$SRV.PING", nil, true},
		{sy, "subscribe to its reply prefix", "sub", natsauth.InboxPrefix(sy) + ".x", nil, true},
		{sy, "subscribe to the gateway's replies", "sub", natsauth.InboxPrefix(gw) + ".>", nil, false},
		{sy, "subscribe to every reply (_INBOX.>)", "sub", "_INBOX.>", nil, false},
		{sy, "create a stream not of the installation", "req", "$JS.API.STREAM.CREATE.OTHER", map[string]any{"name": "OTHER"}, false},
		{sy, "delete a stream", "req", "$JS.API.STREAM.DELETE.INBOX_0", nil, false},
		{sy, "trim an INBOX stream", "req", "$JS.API.STREAM.PURGE.INBOX_0", map[string]any{"seq": 1}, true},
		{sy, "direct get of an entry's time", "req", "$JS.API.DIRECT.GET.INBOX_0", map[string]any{"seq": 1}, true},
		// Lifecycle (user deletion, housekeeping): a user's subject purged,
		// device consumers listed and deleted; the revocation asked for.
		{sy, "purge a user's inbox subject", "req", "$JS.API.STREAM.PURGE.INBOX_0", map[string]any{"filter": "inbox.0.7"}, true},
		{sy, "list the consumers of an INBOX stream", "req", "$JS.API.CONSUMER.NAMES.INBOX_0", map[string]any{"offset": 0}, true},
		{sy, "direct get of a user's last entry", "req", "$JS.API.DIRECT.GET.INBOX_0.inbox.0.7", nil, true},
		{sy, "delete a device consumer", "req", "$JS.API.CONSUMER.DELETE.INBOX_0." + dev8.Durable, nil, true},
		{sy, "ask the admin API for a revocation", "pub", "inboxd.admin.user.revoke", []byte(`{"uid":7}`), true},
		{sy, "announce erased bodies", "pub", "inboxd.event.bodies.erased", []byte("1"), true},
		{sy, "purge SEND", "req", "$JS.API.STREAM.PURGE.SEND", nil, false},
		{sy, "delete the fanout's consumer", "req", "$JS.API.CONSUMER.DELETE.SEND.fanout_0", nil, false},
		{sy, "call another admin endpoint", "pub", "inboxd.admin.conv.create", []byte("{}"), false},
		{sy, "purge one user's subject of an INBOX partition (early cleanup)", "req", "$JS.API.STREAM.PURGE.INBOX_0",
			map[string]any{"filter": "inbox.0.7", "seq": 1}, true},
		{sy, "direct get from an INBOX partition (early cleanup)", "req", "$JS.API.DIRECT.GET.INBOX_0", map[string]any{"next_by_subj": "inbox.0.7"}, true},
		{sy, "purge SEND", "req", "$JS.API.STREAM.PURGE.SEND", nil, false},
		{sy, "create a consumer on SEND", "req", "$JS.API.CONSUMER.CREATE.SEND.x", nil, false},
		{sy, "create a device consumer", "req", "$JS.API.CONSUMER.CREATE.INBOX_0.x.inbox.0.8", nil, false},
		{sy, "reset a device consumer", "req", "$JS.API.CONSUMER.RESET.INBOX_0." + d7, nil, false},
		{sy, "publish a send", "req", "send.0.1", []byte("x"), false},
		// Stream epochs: the syncer republishes the entries of an INBOX
		// stream it renumbers (internal/archive/epoch.go); it may purge
		// those streams anyway.
		{sy, "republish an inbox entry (a renumbered stream)", "req", "inbox.0.7", []byte("x"), true},

		// The leases bucket (cluster roles): the fanout writes and reads
		// its node id keys, the syncer its leader key; nothing else.
		{fo, "take a node id lease", "req", "$KV.inboxd_leases.node.5", []byte("{}"), true},
		{fo, "read a node id lease", "req", "$JS.API.DIRECT.GET.KV_inboxd_leases.$KV.inboxd_leases.node.5", nil, true},
		{fo, "take the syncer's leader lease", "req", "$KV.inboxd_leases.syncer.leader", []byte("{}"), false},
		{fo, "create the leases bucket", "req", "$JS.API.STREAM.CREATE.KV_inboxd_leases", map[string]any{"name": "KV_inboxd_leases"}, false},
		{fo, "purge the leases bucket", "req", "$JS.API.STREAM.PURGE.KV_inboxd_leases", nil, false},
		{gw, "take a node id lease", "req", "$KV.inboxd_leases.node.6", []byte("{}"), false},
		{gw, "take the syncer's leader lease", "req", "$KV.inboxd_leases.syncer.leader", []byte("{}"), false},
		{gw, "read a node id lease", "req", "$JS.API.DIRECT.GET.KV_inboxd_leases.$KV.inboxd_leases.node.5", nil, false},
		{gw, "write any key of the leases bucket", "req", "$KV.inboxd_leases.x", []byte("{}"), false},
		{sy, "take the syncer's leader lease", "req", "$KV.inboxd_leases.syncer.leader", []byte("{}"), true},
		{sy, "read the syncer's leader lease", "req", "$JS.API.DIRECT.GET.KV_inboxd_leases.$KV.inboxd_leases.syncer.leader", nil, true},
		{sy, "take a node id lease", "req", "$KV.inboxd_leases.node.7", []byte("{}"), false},
		{sy, "delete the leases bucket", "req", "$JS.API.STREAM.DELETE.KV_inboxd_leases", nil, false},

		// A device consumer whose server is down is deleted and created
		// again (an R1 consumer on a cluster).
		{gw, "delete a device consumer", "req", "$JS.API.CONSUMER.DELETE.INBOX_0." + dev9.Durable, nil, true},

		// The admin user (the nats CLI, inboxctl) may do anything.
		{natsauth.Admin, "delete a device consumer", "req", "$JS.API.CONSUMER.DELETE.INBOX_0." + d7, nil, true},
	}
	for _, c := range calls {
		t.Run(string(c.role)+": "+c.what, func(t *testing.T) {
			if err := tryCall(url, c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// tryCall makes c's call on a connection of its own, as the services
// connect (the role's reply prefix), and checks the server's verdict: a
// refused call is a permissions violation naming its subject (the client
// knows it by the flush: the server answers in order); an allowed one has
// none, and a request gets a JetStream answer that is not an error.
func tryCall(url string, c natsCall) error {
	opts := []nats.Option{nats.UserInfo(string(c.role), natsauth.Password(c.role)),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})}
	if c.role != natsauth.Admin {
		opts = append(opts, nats.CustomInboxPrefix(natsauth.InboxPrefix(c.role)))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return err
	}
	defer nc.Close()
	body, ok := c.body.([]byte)
	if !ok && c.body != nil {
		if body, err = json.Marshal(c.body); err != nil {
			return err
		}
	}
	var reply *nats.Subscription
	switch c.kind {
	case "req":
		if reply, err = nc.SubscribeSync(nc.NewInbox()); err != nil {
			return err
		}
		err = nc.PublishRequest(c.subject, reply.Subject, body)
	case "pub":
		err = nc.Publish(c.subject, body)
	case "sub":
		_, err = nc.SubscribeSync(c.subject)
	}
	if err != nil {
		return err
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	verb := map[string]string{"req": "publish", "pub": "publish", "sub": "subscription"}[c.kind]
	last := nc.LastError()
	refused := last != nil && strings.Contains(strings.ToLower(last.Error()), fmt.Sprintf("permissions violation for %s to \"%s\"", verb, strings.ToLower(c.subject)))
	switch {
	case !c.allowed && !refused:
		return fmt.Errorf("%s %s %q was let through (last error %v)", c.role, c.kind, c.subject, last)
	case c.allowed && last != nil:
		return fmt.Errorf("%s %s %q: %v", c.role, c.kind, c.subject, last)
	case c.allowed && reply != nil:
		m, err := reply.NextMsg(10 * time.Second)
		if err != nil {
			return fmt.Errorf("%s %q: no answer: %w", c.role, c.subject, err)
		}
		return apiAnswerOK(m)
	}
	return nil
}

// apiAnswerOK accepts a JetStream answer that carries no error: a JSON
// response without "error", a message, or "no messages" (404, 408).
func apiAnswerOK(m *nats.Msg) error {
	if st := m.Header.Get("Status"); st != "" && st != "404" && st != "408" {
		return fmt.Errorf("answer status %s %s", st, m.Header.Get("Description"))
	}
	var r struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if json.Unmarshal(m.Data, &r) == nil && r.Error != nil {
		return fmt.Errorf("JetStream answered %s", r.Error.Description)
	}
	return nil
}

// A split deployment — NATS alone, and a gateway, a fanout and a syncer
// each in a node of its own, logging in as its service's user — stores
// and delivers a send. The gateway and the fanout start before the syncer,
// the only role that may create the streams: they wait for them.
func TestSplitDeploymentWithServiceUsers(t *testing.T) {
	logs := &syncBuffer{}
	log := zap.New(zapcore.NewTee(testenv.Logger(t).Core(),
		zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logs), zap.DebugLevel)))
	db := testenv.Database(t)
	natsNode := testnode.StartNode(t, testnode.Config(t, db), config.RoleEmbeddedNATS)
	base := testnode.Config(t, db)
	base.NATSURL = natsNode.NATS.ClientURL() // each node: its role's user and password

	started := map[config.Role]*node.Node{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, r := range []config.Role{config.RoleGateway, config.RoleFanout} {
		wg.Add(1)
		go func(r config.Role) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			n, err := node.Start(ctx, base, r, log.Named(fmt.Sprint(r)))
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			started[r] = n
			mu.Unlock()
		}(r)
	}
	t.Cleanup(func() {
		for _, n := range started {
			n.Close()
		}
	})
	// Both wait, and say so, until the syncer has created the streams.
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(logs.String(), "waiting for the streams") < 2 {
		select {
		case err := <-errs:
			t.Fatalf("start before the syncer: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway and the fanout did not wait for the streams:\n%s", logs.String())
		}
	}
	scfg := base
	scfg.HTTPAddr = "127.0.0.1:0"
	syncer := testnode.StartNode(t, scfg, config.RoleSyncer)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("start: %v", err)
	}
	gw := started[config.RoleGateway]

	conv := createConv(t, syncer, false, 1, 2)
	receiver := connectDevice(t, gw, 2, "phone", deviceOpts{})
	ids := sendN(t, gw, 1, conv, 3, "split") // STORED
	got := receiver.waitFor(3, 20*time.Second)
	for i, m := range got {
		if m.MsgID != ids[i] {
			t.Fatalf("received %d as message %d, want %d", m.MsgID, i, ids[i])
		}
	}
	// The syncer's data lifecycle with its own grants: a user deletion
	// (consumers listed and deleted, the subject purged, the revocation
	// asked for) and a housekeeping pass over every partition.
	ac := &admin.Client{NC: testnode.Admin(t, syncer)}
	if _, err := ac.DeleteUser(ctxT(t, 10*time.Second), admin.DeleteUserRequest{UID: 1}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(60 * time.Second)
	for {
		d, err := ac.Deletion(ctxT(t, 10*time.Second), 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.State == store.DeletionDone {
			if d.Progress.InboxEntries < 3 || d.Progress.Consumers != 1 { // its 3 messages, and receipts
				t.Fatalf("deletion in a split deployment: %+v; want 3 inbox entries and the sender's consumer removed", d.Progress)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deletion is not done: %+v", d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := syncer.Lifecycle.Housekeep(ctxT(t, 30*time.Second)); err != nil {
		t.Fatalf("housekeeping as the syncer user: %v", err)
	}
	if s := logs.String(); strings.Contains(strings.ToLower(s), "permissions violation") {
		t.Fatalf("a service was refused a subject it uses:\n%s", s)
	}
}

// --nats-ca: a service connects over TLS to a NATS server whose
// certificate a CA of the installation signed; without the CA it is
// refused at once. With --nats-cert/--nats-key it also passes a server
// that verifies its clients, which refuses it without them.
func TestServicesConnectToNATSOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	caFile := filepath.Join(dir, "ca.pem")
	writePEM(t, caFile, "CERTIFICATE", ca.der)
	serverCert := ca.issue(t, x509.ExtKeyUsageServerAuth)
	clientCert, clientKey := filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	cc := ca.issue(t, x509.ExtKeyUsageClientAuth)
	writePEM(t, clientCert, "CERTIFICATE", cc.Certificate[0])
	kb, err := x509.MarshalECPrivateKey(cc.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, clientKey, "EC PRIVATE KEY", kb)

	db := testenv.Database(t)
	for _, verify := range []bool{false, true} {
		tc := &tls.Config{Certificates: []tls.Certificate{serverCert}, MinVersion: tls.VersionTLS12}
		if verify {
			tc.ClientCAs, tc.ClientAuth = ca.pool, tls.RequireAndVerifyClientCert
		}
		s := startNATSServer(t, &server.Options{TLS: true, TLSVerify: verify, TLSConfig: tc, TLSTimeout: 5,
			Users: natsauth.Users(map[natsauth.Role]string{natsauth.Syncer: natsauth.Password(natsauth.Syncer)}, testnode.Layout().InboxPartitions)})
		cfg := testnode.Config(t, db)
		cfg.NATSURL = "tls://" + s.Addr().String()

		if err := startFails(t, cfg, config.RoleSyncer); !strings.Contains(err.Error(), "certificate signed by unknown authority") {
			t.Fatalf("verify=%v: without --nats-ca the start failed with %v, want the server's certificate refused", verify, err)
		}
		cfg.NATSCA = caFile
		if verify {
			if err := startFails(t, cfg, config.RoleSyncer); !strings.Contains(err.Error(), "tls") {
				t.Fatalf("without --nats-cert the start failed with %v, want the missing client certificate", err)
			}
			cfg.NATSCert, cfg.NATSKey = clientCert, clientKey
		}
		n := testnode.StartNode(t, cfg, config.RoleSyncer)
		if !n.NC.TLSRequired() {
			t.Fatalf("verify=%v: connected without TLS", verify)
		}
		if _, err := n.NC.TLSConnectionState(); err != nil {
			t.Fatalf("verify=%v: %v", verify, err)
		}
		n.Close()
	}
}

// --nats-creds: against a server in operator mode (decentralized auth:
// operator and account JWTs, no user passwords), a service logs in with a
// credentials file — a user JWT holding the role's permissions from
// internal/natsauth, and its nkey seed — and works; without it, its
// password login is refused.
func TestServicesLogInWithCredentialsFile(t *testing.T) {
	okp, _ := nkeys.CreateOperator()
	opub, _ := okp.PublicKey()
	// JetStream needs a system account; inboxd's account has JetStream.
	resolver := &server.MemAccResolver{}
	account := func(js bool) (nkeys.KeyPair, string) {
		kp, _ := nkeys.CreateAccount()
		pub, _ := kp.PublicKey()
		ac := jwt.NewAccountClaims(pub)
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		ajwt, err := ac.Encode(okp)
		if err != nil {
			t.Fatal(err)
		}
		if err := resolver.Store(pub, ajwt); err != nil {
			t.Fatal(err)
		}
		return kp, pub
	}
	_, sysPub := account(false)
	akp, _ := account(true)
	oc := jwt.NewOperatorClaims(opub)
	oc.SystemAccount = sysPub
	if _, err := oc.Encode(okp); err != nil { // self-signed: fills the operator's issuer
		t.Fatal(err)
	}
	s := startNATSServer(t, &server.Options{TrustedOperators: []*jwt.OperatorClaims{oc}, AccountResolver: resolver, SystemAccount: sysPub})

	// A user of the account: its credentials file, with p's permissions
	// (nil: all).
	dir := t.TempDir()
	user := func(name string, p *server.Permissions) string {
		ukp, _ := nkeys.CreateUser()
		upub, _ := ukp.PublicKey()
		uc := jwt.NewUserClaims(upub)
		uc.Name = name
		if p != nil {
			uc.Pub.Allow.Add(p.Publish.Allow...)
			uc.Pub.Deny.Add(p.Publish.Deny...)
			uc.Sub.Allow.Add(p.Subscribe.Allow...)
			uc.Resp = &jwt.ResponsePermission{MaxMsgs: p.Response.MaxMsgs}
		}
		ujwt, err := uc.Encode(akp)
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := ukp.Seed()
		creds, err := jwt.FormatUserConfig(ujwt, seed)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, name+".creds")
		if err := os.WriteFile(f, creds, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	// The syncer's user has its permissions as natsauth renders them.
	credsFile := user("syncer", natsauth.Permissions(natsauth.Syncer, testnode.Layout().InboxPartitions))
	adminCreds := user("admin", nil)

	cfg := testnode.Config(t, testenv.Database(t))
	cfg.NATSURL = s.ClientURL()
	if err := startFails(t, cfg, config.RoleSyncer); !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Fatalf("without --nats-creds the start failed with %v, want the login refused", err)
	}
	cfg.NATSCreds = credsFile
	n := testnode.StartNode(t, cfg, config.RoleSyncer)
	// It works: the syncer created the streams, and its admin API answers.
	if _, err := jetstreamOf(t, n).Stream(ctxT(t, 10*time.Second), "INBOX_0"); err != nil {
		t.Fatal(err)
	}
	adm, err := nats.Connect(s.ClientURL(), nats.UserCredentials(adminCreds))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	if _, err := (&admin.Client{NC: adm}).CreateConv(ctxT(t, 10*time.Second), admin.CreateConvRequest{Members: []int64{1, 2}}); err != nil {
		t.Fatalf("admin API: %v", err)
	}
}

// No log line and no error of a node names the password or token of its
// NATS URL or the password of its database URL: not when it connects,
// reconnects or fails to.
func TestLogsNameNoPasswords(t *testing.T) {
	const natsSecret, tokenSecret, pgSecret = "nats-Pw-5f3a9c", "tok-Sec-81d2e7", "pg-Pw-c4b1f0"
	t.Setenv("INBOXD_NATS_PASSWORD_SYNCER", natsSecret)
	logs := &syncBuffer{}
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(logs), zap.DebugLevel))
	db := testenv.Database(t)
	natsNode := testnode.StartNode(t, testnode.Config(t, db), config.RoleEmbeddedNATS)
	host := strings.TrimPrefix(natsNode.NATS.ClientURL(), "nats://")

	cfg := testnode.Config(t, db)
	cfg.NATSURL = "nats://syncer:" + natsSecret + "@" + host
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg, config.RoleSyncer, log)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	// A reconnect logs the URL it reconnected to.
	cid, err := n.NC.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	if err := natsNode.NATS.DisconnectClientByID(cid); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), "nats reconnected") {
		if time.Now().After(deadline) {
			t.Fatalf("no reconnect logged:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s := logs.String(); !strings.Contains(s, "syncer:xxxxx@"+host) {
		t.Fatalf("the logs name the NATS URL nowhere (redacted); nothing was checked:\n%s", s)
	}

	// Failed starts: NATS with a password or a token that nobody answers,
	// Postgres with a password it refuses.
	var failures []string
	for _, bad := range []func(*config.Config){
		func(c *config.Config) { c.NATSURL = "nats://syncer:" + natsSecret + "@127.0.0.1:1" },
		func(c *config.Config) { c.NATSURL = "nats://" + tokenSecret + "@127.0.0.1:1,nats://127.0.0.1:2" },
		func(c *config.Config) {
			c.DatabaseURL = "postgres://inboxd:" + pgSecret + "@127.0.0.1:5432/inboxd?sslmode=disable"
		},
		func(c *config.Config) { c.DatabaseURL = "postgres://inboxd:" + pgSecret + "@127.0.0.1:notaport/inboxd" },
	} {
		c := testnode.Config(t, db)
		bad(&c)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		n, err := node.Start(ctx, c, config.RoleSyncer, log)
		cancel()
		if err == nil {
			n.Close()
			t.Fatalf("a node started with %s / %s", c.NATSURL, c.DatabaseURL)
		}
		failures = append(failures, err.Error())
	}
	all := logs.String() + strings.Join(failures, "\n")
	for _, secret := range []string{natsSecret, tokenSecret, pgSecret} {
		if strings.Contains(all, secret) {
			t.Errorf("%q is in the logs or errors:\n%s", secret, all)
		}
	}
	if !strings.Contains(failures[0], "syncer:xxxxx@127.0.0.1:1") || !strings.Contains(failures[1], "xxxxx@127.0.0.1:1") {
		t.Errorf("the failed connects do not name their (redacted) URLs: %q", failures[:2])
	}
}

// startFails starts a node that must not start, and returns its error.
func startFails(t *testing.T, cfg config.Config, roles config.Role) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg, roles, testenv.Logger(t))
	if err == nil {
		n.Close()
		t.Fatalf("a node started with NATS %s, CA %q, cert %q, creds %q", cfg.NATSURL, cfg.NATSCA, cfg.NATSCert, cfg.NATSCreds)
	}
	return err
}

// startNATSServer runs a NATS server with JetStream on a free port with
// opts' authentication and TLS; it is shut down when the test ends.
func startNATSServer(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoSigs, opts.NoLog = "127.0.0.1", -1, true, true
	opts.JetStream, opts.StoreDir = true, t.TempDir()
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func jetstreamOf(t *testing.T, n *node.Node) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(n.NC)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// testCA is a certificate authority made for one test.
type testCA struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	der  []byte
	pool *x509.CertPool
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "inboxd test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{key: key, cert: cert, der: der, pool: pool}
}

// issue signs a certificate for 127.0.0.1 with usage.
func (ca *testCA) issue(t *testing.T, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer for a logger written from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
