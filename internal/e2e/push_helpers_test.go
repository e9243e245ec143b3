package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/push"
	"github.com/inboxd/inboxd/internal/push/bridge"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// pushEnv is a split deployment with offline push: NATS alone with the
// per-service users (the push bridge's among them), a gateway, a fanout
// and a syncer with --push, each a node of its own logging in as its
// service's user, so the pusher and the bridge run with their real grants.
// The syncer can be restarted alone.
type pushEnv struct {
	t      testing.TB
	base   config.Config
	nats   *node.Node
	gw, fo *node.Node
	syncer *node.Node
	admin  *nats.Conn
	ajs    jetstream.JetStream
}

func startPushEnv(t testing.TB, after, collapse time.Duration) *pushEnv {
	t.Helper()
	return startPushEnvWith(t, func(c *config.Config) { c.PushAfter, c.PushCollapse = after, collapse })
}

// startPushEnvWith is startPushEnv with the configuration adjusted by set.
func startPushEnvWith(t testing.TB, set func(*config.Config)) *pushEnv {
	t.Helper()
	db := testenv.Database(t)
	e := &pushEnv{t: t}
	e.nats = testnode.StartNode(t, testnode.Config(t, db), config.RoleEmbeddedNATS)
	e.base = testnode.Config(t, db)
	e.base.NATSURL = e.nats.NATS.ClientURL()
	e.base.Push = true
	set(&e.base)
	e.startSyncer()
	t.Cleanup(func() {
		if e.syncer != nil {
			e.syncer.Close()
		}
	})
	e.gw = testnode.StartNode(t, e.base, config.RoleGateway)
	e.fo = testnode.StartNode(t, e.base, config.RoleFanout)
	var err error
	if e.admin, err = nats.Connect(e.base.NATSURL, nats.UserInfo(string(natsauth.Admin), natsauth.Password(natsauth.Admin))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.admin.Close)
	if e.ajs, err = jetstream.New(e.admin); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *pushEnv) startSyncer() {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, e.base, config.RoleSyncer, testenv.Logger(e.t).Named("syncer"))
	if err != nil {
		e.t.Fatalf("start the syncer: %v", err)
	}
	e.syncer = n
}

func (e *pushEnv) stopSyncer() {
	e.syncer.Close()
	e.syncer = nil
}

// events returns every push event in the PUSH stream, in stream order,
// with its Nats-Msg-Id (read with the admin user).
func (e *pushEnv) events() []push.Event {
	e.t.Helper()
	ctx := ctxT(e.t, 10*time.Second)
	s, err := e.ajs.Stream(ctx, streams.PushStream)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []push.Event
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			e.t.Fatal(err)
		}
		var ev push.Event
		if err := json.Unmarshal(m.Data, &ev); err != nil {
			e.t.Fatalf("push event %d: %v: %s", seq, err, m.Data)
		}
		if id := m.Header.Get(jetstream.MsgIDHeader); id != ev.ID {
			e.t.Fatalf("push event %s published with Nats-Msg-Id %q", ev.ID, id)
		}
		out = append(out, ev)
	}
	return out
}

// outcomes returns the syncer's inboxd_push_messages_total by outcome.
func (e *pushEnv) outcome(name string) float64 {
	e.t.Helper()
	return metricLabelled(e.t, e.syncer, "inboxd_push_messages_total", `outcome="`+name+`"`)
}

// metricLabelled reads one labelled series of a node's metric (0 when it
// was never set).
func metricLabelled(t testing.TB, n *node.Node, name, label string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.Ops.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v float64
	for _, line := range splitLines(string(b)) {
		var f float64
		if _, err := fmt.Sscanf(line, name+"{"+label+"} %g", &f); err == nil {
			v = f
		}
	}
	return v
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// relay is a real HTTP server standing in for the customer's APNs/FCM
// relay: it records every request and answers what respond says.
type relay struct {
	srv *httptest.Server

	mu       sync.Mutex
	reqs     []relayReq // every request, in arrival order
	accepted []relayReq // those answered 2xx
	respond  func(n int, r *http.Request) int
}

type relayReq struct {
	ev     push.Event
	body   []byte
	header http.Header
}

func newRelay(t testing.TB, respond func(n int, r *http.Request) int) *relay {
	rl := &relay{respond: respond}
	if rl.respond == nil {
		rl.respond = func(int, *http.Request) int { return http.StatusOK }
	}
	rl.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev push.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rr := relayReq{ev: ev, body: body, header: r.Header.Clone()}
		rl.mu.Lock()
		rl.reqs = append(rl.reqs, rr)
		n := len(rl.reqs)
		rl.mu.Unlock()
		status := rl.respond(n, r)
		if status/100 == 2 {
			rl.mu.Lock()
			rl.accepted = append(rl.accepted, rr)
			rl.mu.Unlock()
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(rl.srv.Close)
	return rl
}

func (rl *relay) got() (reqs, accepted []relayReq) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return append([]relayReq(nil), rl.reqs...), append([]relayReq(nil), rl.accepted...)
}

// waitAccepted waits until the relay accepted n requests.
func (rl *relay) waitAccepted(t testing.TB, n int, within time.Duration) []relayReq {
	t.Helper()
	var acc []relayReq
	checkFor(t, within, func() error {
		if _, acc = rl.got(); len(acc) < n {
			return fmt.Errorf("relay accepted %d of %d push events", len(acc), n)
		}
		return nil
	})
	return acc
}

// testWebhookSecret signs the bridge's requests in the tests.
const testWebhookSecret = "webhook-secret-5c1e9d"

// startBridge runs the push bridge in the test process as the pushbridge
// NATS user, POSTing to rl; the returned stop ends it gracefully.
func (e *pushEnv) startBridge(rl *relay, opts bridge.Options) (stop func()) {
	e.t.Helper()
	nc, err := nats.Connect(e.base.NATSURL, nats.UserInfo(string(natsauth.PushBridge), natsauth.Password(natsauth.PushBridge)),
		nats.CustomInboxPrefix(natsauth.InboxPrefix(natsauth.PushBridge)))
	if err != nil {
		e.t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		e.t.Fatal(err)
	}
	opts.URL, opts.Secret = rl.srv.URL, testWebhookSecret
	if opts.RetryMin == 0 {
		opts.RetryMin, opts.RetryMax = 100*time.Millisecond, 500*time.Millisecond
	}
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = 20
	}
	b, err := bridge.New(opts, testenv.Logger(e.t).Named("pushbridge"), js, prometheus.NewRegistry())
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = b.Run(ctx)
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
			nc.Close()
		})
	}
	e.t.Cleanup(stop)
	return stop
}

// offline sends count messages from uid to conv through the gateway (uid's
// device "phone") and returns their msg_ids.
func (e *pushEnv) send(uid, conv int64, count int, prefix string) []int64 {
	e.t.Helper()
	return sendN(e.t, e.gw, uid, conv, count, prefix)
}

// convOf creates a conversation through the admin API of the syncer.
func (e *pushEnv) conv(group bool, members ...int64) int64 {
	e.t.Helper()
	return createConvVia(e.t, e.admin, group, members...)
}

func createConvVia(t testing.TB, nc *nats.Conn, group bool, members ...int64) int64 {
	t.Helper()
	r, err := (&admin.Client{NC: nc}).CreateConv(ctxT(t, 10*time.Second), admin.CreateConvRequest{Members: members, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	return r.ConvID
}
