package ops_test

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/ops"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// scrape returns a node's /metrics as series ("name{labels}") to values.
func scrape(t *testing.T, n *node.Node) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + n.Ops.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			t.Fatalf("/metrics line %q: %v", l, err)
		}
		out[l[:i]] = v
	}
	return out
}

// sum adds the series of a metric whose labels contain every one of want.
func sum(m map[string]float64, name string, want ...string) (float64, bool) {
	var s float64
	found := false
	for k, v := range m {
		rest, ok := strings.CutPrefix(k, name)
		if !ok || (rest != "" && rest[0] != '{') {
			continue
		}
		match := true
		for _, w := range want {
			match = match && strings.Contains(rest, w)
		}
		if match {
			s += v
			found = true
		}
	}
	return s, found
}

// waitFor polls the node's metrics until cond holds (20 s at most).
func waitFor(t *testing.T, n *node.Node, what string, cond func(m map[string]float64) bool) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m := scrape(t, n)
		if cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 20 s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// The operator metrics of a real all-in-one node: the build, the NATS
// connections, the Postgres pool; the login and send → STORED latencies
// count a login and a send; the JetStream API calls are counted; the
// fanout's lag per SEND partition rises while the fanout cannot store
// (Postgres blocked) and falls back to 0 after.
func TestOperatorMetricsOnANode(t *testing.T) {
	n := testnode.AllInOne(t)
	m := scrape(t, n)
	if v, ok := sum(m, "inboxd_build_info", `go_version="`+runtime.Version()+`"`, `version="`, `revision="`); !ok || v != 1 {
		t.Errorf("inboxd_build_info: %v %v, want 1 with version, go_version %s and revision", v, ok, runtime.Version())
	}
	for _, c := range []string{"main", "backfill", "archiver"} {
		if v, ok := sum(m, "inboxd_nats_connected", `conn="`+c+`"`); !ok || v != 1 {
			t.Errorf("inboxd_nats_connected{conn=%q} = %v (%v), want 1", c, v, ok)
		}
		if v, ok := sum(m, "inboxd_nats_reconnecting", `conn="`+c+`"`); !ok || v != 0 {
			t.Errorf("inboxd_nats_reconnecting{conn=%q} = %v (%v), want 0", c, v, ok)
		}
	}
	// One series per pool, at its configured size (config.Defaults; the
	// retention job's is 2).
	for pool, size := range map[string]float64{"send": 4, "catchup": 4, "background": 2, "retention": 2} {
		if v, _ := sum(m, "inboxd_postgres_pool_max_conns", `pool="`+pool+`"`); v != size {
			t.Errorf("inboxd_postgres_pool_max_conns{pool=%q} = %v, want %v", pool, v, size)
		}
	}
	if v, _ := sum(m, "inboxd_jetstream_api_requests_total"); v <= 0 {
		t.Errorf("inboxd_jetstream_api_requests_total = %v after the start's stream and consumer calls", v)
	}
	if v, ok := sum(m, "inboxd_gateway_login_seconds_count"); !ok || v != 0 {
		t.Errorf("inboxd_gateway_login_seconds_count = %v (%v) before any login", v, ok)
	}
	if v, ok := sum(m, "inboxd_gateway_send_stored_seconds_count"); !ok || v != 0 {
		t.Errorf("inboxd_gateway_send_stored_seconds_count = %v (%v) before any send", v, ok)
	}
	acquires, _ := sum(m, "inboxd_postgres_pool_acquires_total", `pool="send"`)
	// The fanout reads its consumers' state once it serves them, then
	// every 5 s: every partition has its series, at 0.
	waitFor(t, n, "a lag series per SEND partition", func(m map[string]float64) bool {
		for p := range 4 {
			if v, ok := sum(m, "inboxd_fanout_pending_sends", `partition="`+strconv.Itoa(p)+`"`); !ok || v != 0 {
				return false
			}
		}
		return true
	})

	conv, err := (&admin.Client{NC: testnode.Admin(t, n)}).CreateConv(ctxT(t, 10*time.Second), admin.CreateConvRequest{Members: []int64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctxT(t, 10*time.Second), client.Options{URL: n.Gateway.WSURL(), Token: testenv.Token(t, 1, "phone")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Send(ctxT(t, 10*time.Second), conv.ConvID, "m1", "hello"); err != nil {
		t.Fatal(err)
	}
	m = scrape(t, n)
	if v, _ := sum(m, "inboxd_gateway_login_seconds_count"); v != 1 {
		t.Errorf("inboxd_gateway_login_seconds_count = %v after one login, want 1", v)
	}
	if v, _ := sum(m, "inboxd_gateway_send_stored_seconds_count"); v != 1 {
		t.Errorf("inboxd_gateway_send_stored_seconds_count = %v after one STORED send, want 1", v)
	}
	if v, _ := sum(m, "inboxd_gateway_send_stored_seconds_sum"); v <= 0 {
		t.Errorf("inboxd_gateway_send_stored_seconds_sum = %v", v)
	}
	if v, _ := sum(m, "inboxd_postgres_pool_acquires_total", `pool="send"`); v <= acquires {
		t.Errorf("inboxd_postgres_pool_acquires_total %v, not above %v after a send (the fanout's writes)", v, acquires)
	}

	// Block the fanout's content insert: the next send stays pending.
	tx, err := n.Store.Pool.Begin(ctxT(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(context.Background(), `LOCK TABLE msg_content IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() {
		_, err := c.Send(context.Background(), conv.ConvID, "m2", "blocked")
		sent <- err
	}()
	waitFor(t, n, "pending send and a stalled partition", func(m map[string]float64) bool {
		p, _ := sum(m, "inboxd_fanout_pending_sends")
		s, _ := sum(m, "inboxd_fanout_stalled_seconds")
		o, _ := sum(m, "inboxd_fanout_oldest_pending_seconds")
		return p >= 1 && s > 0 && o > 0
	})
	if err := tx.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	waitFor(t, n, "no pending sends after the unblock", func(m map[string]float64) bool {
		p, _ := sum(m, "inboxd_fanout_pending_sends")
		s, _ := sum(m, "inboxd_fanout_stalled_seconds")
		o, _ := sum(m, "inboxd_fanout_oldest_pending_seconds")
		return p == 0 && s == 0 && o == 0
	})
}

// A service's NATS connection state follows its server: reconnecting
// while the server is down, connected again after, one reconnect counted.
func TestNATSConnectionMetricsFollowTheServer(t *testing.T) {
	ns := testenv.StartNATS(t)
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.NATSURL = ns.URL()
	n := testnode.StartNode(t, cfg, config.RoleSyncer)
	m := scrape(t, n)
	if v, _ := sum(m, "inboxd_nats_connected", `conn="main"`); v != 1 {
		t.Fatalf("inboxd_nats_connected = %v before the outage", v)
	}
	if v, ok := sum(m, "inboxd_nats_reconnects_total", `conn="main"`); !ok || v != 0 {
		t.Fatalf("inboxd_nats_reconnects_total = %v (%v) before the outage", v, ok)
	}
	ns.Stop()
	waitFor(t, n, "reconnecting while NATS is down", func(m map[string]float64) bool {
		c, _ := sum(m, "inboxd_nats_connected", `conn="main"`)
		r, _ := sum(m, "inboxd_nats_reconnecting", `conn="main"`)
		return c == 0 && r == 1
	})
	ns.Start()
	waitFor(t, n, "connected again, one reconnect", func(m map[string]float64) bool {
		c, _ := sum(m, "inboxd_nats_connected", `conn="main"`)
		r, _ := sum(m, "inboxd_nats_reconnects_total", `conn="main"`)
		return c == 1 && r == 1
	})
}

// The JetStream trace counts requests and answers, and an answer with an
// error by its kind; the roles of one registry share the counters.
func TestJetStreamTraceCountsAPIErrors(t *testing.T) {
	ns := testenv.StartNATS(t)
	nc, err := nats.Connect(ns.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	reg := prometheus.NewRegistry()
	js, err := jetstream.New(nc, jetstream.WithClientTrace(ops.JetStreamTrace(reg)))
	if err != nil {
		t.Fatal(err)
	}
	js2, err := jetstream.New(nc, jetstream.WithClientTrace(ops.JetStreamTrace(reg))) // a second role
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Stream(ctxT(t, 5*time.Second), "NOPE"); err == nil {
		t.Fatal("stream NOPE exists")
	}
	if _, err := js2.CreateStream(ctxT(t, 5*time.Second), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js2.Consumer(ctxT(t, 5*time.Second), "S", "nobody"); err == nil {
		t.Fatal("consumer nobody exists")
	}
	want := `
# HELP inboxd_jetstream_api_errors_total JetStream API responses that carried an error, by kind (the JetStream error code's name, or code_<n>).
# TYPE inboxd_jetstream_api_errors_total counter
inboxd_jetstream_api_errors_total{kind="consumer_not_found"} 1
inboxd_jetstream_api_errors_total{kind="stream_not_found"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "inboxd_jetstream_api_errors_total"); err != nil {
		t.Error(err)
	}
	mf, _ := reg.Gather()
	for _, f := range mf {
		switch f.GetName() {
		case "inboxd_jetstream_api_requests_total", "inboxd_jetstream_api_responses_total":
			if v := f.GetMetric()[0].GetCounter().GetValue(); v != 3 {
				t.Errorf("%s = %v, want 3", f.GetName(), v)
			}
		}
	}
}
