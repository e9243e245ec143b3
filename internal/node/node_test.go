package node_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// A split deployment — an embedded NATS server alone (inboxd --nats-only)
// and a gateway, a fanout and a syncer each in a node of its own, logging in
// as its service's least-privilege user — is ready, delivers and archives a
// message, and no role is refused a NATS subject it uses.
func TestSplitDeploymentDelivers(t *testing.T) {
	logs, log := observedLogger(t)
	base := testnode.Config(t, testenv.Database(t))
	natsNode := startNode(t, base, config.RoleEmbeddedNATS, log)
	url := natsNode.NATS.ClientURL()
	nodes := map[string]*node.Node{"nats": natsNode}
	// The syncer first: it creates the streams the others wait for.
	for _, r := range []struct {
		name string
		role config.Role
	}{{"syncer", config.RoleSyncer}, {"fanout", config.RoleFanout}, {"gateway", config.RoleGateway}} {
		cfg := base
		cfg.NATSURL = url // user and password: the service's defaults
		nodes[r.name] = startNode(t, cfg, r.role, log.Named(r.name))
	}
	for name, n := range nodes {
		if code, body := healthz(t, n); code != http.StatusOK {
			t.Errorf("%s: /healthz %d: %s", name, code, body)
		}
	}

	// Each binary opens the Postgres pools of its roles only
	// (docs/design.md, "Postgres pools").
	for name, want := range map[string]string{"gateway": "send catchup", "fanout": "send", "syncer": "background retention"} {
		p := nodes[name].Pools
		var got []string
		for _, x := range []struct {
			name string
			on   bool
		}{{"send", p.Send != nil}, {"catchup", p.Catchup != nil}, {"background", p.Background != nil}, {"retention", p.Retention != nil}} {
			if x.on {
				got = append(got, x.name)
			}
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s: pools %v, want %s", name, got, want)
		}
	}

	adm, err := nats.Connect(url, nats.UserInfo(string(natsauth.Admin), natsauth.Password(natsauth.Admin)))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conv, err := (&admin.Client{NC: adm}).CreateConv(ctx, admin.CreateConvRequest{Members: []int64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}

	gw := nodes["gateway"].Gateway
	got := make(chan client.Message, 1)
	receiver, err := client.Dial(ctx, client.Options{URL: gw.WSURL(), Token: testenv.Token(t, 2, "phone"),
		Handler: func(m client.Message) error { got <- m; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer receiver.Close()
	sender, err := client.Dial(ctx, client.Options{URL: "tcp://" + gw.TCPAddr(), Token: testenv.Token(t, 1, "laptop")})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	res, err := sender.Send(ctx, conv.ConvID, "split-1", "hello")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m.MsgID != res.MsgID || m.ConvID != conv.ConvID {
			t.Fatalf("received %+v, want msg_id %d in conv %d", m, res.MsgID, conv.ConvID)
		}
	case <-ctx.Done():
		t.Fatalf("message %d not delivered", res.MsgID)
	}
	// Both members' entries archived: the archiver is past its start.
	st := nodes["syncer"].Store
	for archived := 0; archived < 2; {
		if err := st.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox_archive`).Scan(&archived); err != nil {
			t.Fatalf("archived entries (%d so far): %v", archived, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, e := range logs.All() {
		if strings.Contains(strings.ToLower(fmt.Sprint(e.Message, e.ContextMap())), "permissions violation") {
			t.Errorf("%s: %s %v", e.LoggerName, e.Message, e.ContextMap())
		}
	}
}

// A start that fails after some roles are up (here the gateway, whose
// WebSocket port is taken, after the syncer and the fanout) returns the
// error and closes what it started: the ops, debug and NATS ports are free
// again.
func TestFailedStartClosesWhatItStarted(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	cfg.NATSListen = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	cfg.WSAddr = taken.Addr().String()
	cfg.DebugHTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg, config.RoleAllInOne, testenv.Logger(t))
	if err == nil {
		n.Close()
		t.Fatal("a gateway started on a taken port")
	}
	if !strings.Contains(err.Error(), "listen websocket") {
		t.Fatalf("start failed with %v, want the taken WebSocket port", err)
	}
	for _, addr := range []string{cfg.HTTPAddr, cfg.DebugHTTPAddr, cfg.NATSListen} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s still taken after the failed start: %v", addr, err)
			continue
		}
		ln.Close()
	}
}

// The gateway's keys are loaded before anything starts: a bad key set, a
// short secret or a missing public key file is reported at once, not after
// Postgres (here never reachable) was waited for, and names its setting.
func TestBadTokenKeysFailBeforeWaiting(t *testing.T) {
	free := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)) // nothing listens there
	for _, tc := range []struct {
		name string
		set  func(*config.Config)
		want string
	}{
		{"missing key set", func(c *config.Config) { c.TokenKeysFile = "/nonexistent/keys.json" }, "--token-keys: open /nonexistent/keys.json"},
		{"short secret", func(c *config.Config) { c.TokenSecret = "short" }, "--token-secret (INBOXD_TOKEN_SECRET): auth: HS256 secret is 5 bytes, want at least 32"},
		{"missing public key", func(c *config.Config) { c.TokenEdKeyFile = "/nonexistent/tokens.pub" }, "--token-ed25519-key: open /nonexistent/tokens.pub"},
		{"no key", func(c *config.Config) { c.TokenSecret = "" }, "no way to verify tokens"},
	} {
		cfg := testnode.Config(t, "postgres://inboxd:inboxd@"+free+"/inboxd?connect_timeout=1")
		tc.set(&cfg)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		n, err := node.Start(ctx, cfg, config.RoleAllInOne, testenv.Logger(t))
		cancel()
		if err == nil {
			n.Close()
			t.Fatalf("%s: started", tc.name)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: start failed with %v, want %q", tc.name, err, tc.want)
		}
	}
}

// startNode is testnode.StartNode with log.
func startNode(t *testing.T, cfg config.Config, roles config.Role, log *zap.Logger) *node.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := node.Start(ctx, cfg, roles, log)
	if err != nil {
		t.Fatalf("start %v: %v", roles, err)
	}
	t.Cleanup(n.Close)
	return n
}

// observedLogger logs to the test log and keeps the warnings and errors.
func observedLogger(t *testing.T) (*observer.ObservedLogs, *zap.Logger) {
	core, logs := observer.New(zap.WarnLevel)
	tl := testenv.Logger(t)
	return logs, zap.New(zapcore.NewTee(tl.Core(), core))
}

func healthz(t *testing.T, n *node.Node) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + n.Ops.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}
