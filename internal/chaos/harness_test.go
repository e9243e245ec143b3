package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/internal/testenv"
)

// harness is the system under test: four processes and Postgres.
type harness struct {
	t        *testing.T
	dir      string
	natsPort int
	tcpPort  int
	dbURL    string
	nats     *proc
	gateway  *proc
	fanout   *proc
	syncer   *proc
	httpGW   string
	debugGW  string // the gateway's --debug-http: /debug/sessions, /debug/pprof
}

func startHarness(t *testing.T, pl plan) *harness {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	out, err := exec.Command("go", "build", "-o", bin+"/", "../../cmd/inboxd", "../../cmd/gateway", "../../cmd/fanout", "../../cmd/syncer").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	h := &harness{t: t, dir: dir, natsPort: testenv.FreePort(t), tcpPort: testenv.FreePort(t), dbURL: testenv.Database(t)}
	natsURL := "nats://127.0.0.1:" + strconv.Itoa(h.natsPort)
	// --drain-delay 0s: no load balancer watches these processes, and a
	// SIGTERM'd one should go at once.
	common := []string{"--database-url", h.dbURL, "--inbox-partitions", "4", "--send-partitions", "4", "--log-level", "warn", "--drain-delay", "0s"}
	h.nats = newProc(t, dir, "nats", bin+"/inboxd", "--nats-only", "--data", filepath.Join(dir, "nats"),
		"--nats-listen", "127.0.0.1:"+strconv.Itoa(h.natsPort), "--http", "127.0.0.1:0", "--drain-delay", "0s")
	h.httpGW = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	h.debugGW = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	h.gateway = newProc(t, dir, "gateway", bin+"/gateway", append([]string{"--nats", natsURL, "--tcp", "127.0.0.1:" + strconv.Itoa(h.tcpPort),
		"--ws", "127.0.0.1:0", "--http", h.httpGW, "--debug-http", h.debugGW, "--heartbeat", "2s", "--token-secret", testenv.Secret,
		"--new-device-max", "1000000000", "--send-rate", "100000", "--pull-rate", "1000",
		"--offline-threshold", strconv.Itoa(pl.offlineThreshold)}, common...)...)
	h.fanout = newProc(t, dir, "fanout", bin+"/fanout", append([]string{"--nats", natsURL, "--http", "127.0.0.1:0"}, common...)...) // node id leased: a restart after SIGKILL takes a free one at once
	h.syncer = newProc(t, dir, "syncer", bin+"/syncer", append([]string{"--nats", natsURL, "--http", "127.0.0.1:0"}, common...)...)
	t.Cleanup(func() {
		for _, p := range []*proc{h.gateway, h.fanout, h.syncer, h.nats} {
			p.stop()
		}
		if t.Failed() {
			for _, n := range []string{"gateway", "fanout", "syncer", "nats"} {
				b, _ := os.ReadFile(filepath.Join(dir, n+".log"))
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("--- %s.log (tail)\n%s", n, b)
			}
		}
	})
	h.waitHealthy(60 * time.Second)
	return h
}

func (h *harness) waitHealthy(within time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < within {
		resp, err := http.Get("http://" + h.httpGW + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return time.Since(start)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.t.Fatalf("gateway not healthy after %s", within)
	return 0
}

func (h *harness) natsURL() string { return "nats://127.0.0.1:" + strconv.Itoa(h.natsPort) }

// restartPostgres restarts the local cluster that serves url, found by its
// port in pg_lsclusters (fast shutdown: connections are cut mid-flight).
// It needs the Debian cluster tools and the right to run pg_ctlcluster; a
// failure fails the run (a run without the fault would not show it).
func restartPostgres(url string) error {
	version, name, err := clusterOf(url)
	if err != nil {
		return err
	}
	if b, err := exec.Command("pg_ctlcluster", version, name, "restart", "-m", "fast").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctlcluster %s %s restart: %w: %s", version, name, err, b)
	}
	return nil
}

// clusterOf finds the local cluster (version and name) listening on url's
// port: the suite must restart the Postgres it uses, not whichever cluster
// pg_lsclusters lists first.
func clusterOf(url string) (version, name string, err error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return "", "", err
	}
	if cfg.Host != "127.0.0.1" && cfg.Host != "localhost" && cfg.Host != "::1" && !strings.HasPrefix(cfg.Host, "/") {
		return "", "", fmt.Errorf("postgres at %s is not local: cannot restart it", cfg.Host)
	}
	out, err := exec.Command("pg_lsclusters", "-h").Output()
	if err != nil {
		return "", "", fmt.Errorf("pg_lsclusters: %w", err)
	}
	return clusterOnPort(string(out), int(cfg.Port))
}

// clusterOnPort finds the cluster on port in the output of `pg_lsclusters -h`.
func clusterOnPort(lsclusters string, port int) (version, name string, err error) {
	p := strconv.Itoa(port)
	for _, line := range strings.Split(lsclusters, "\n") {
		// Ver Cluster Port Status Owner Data-directory Log-file
		if f := strings.Fields(line); len(f) >= 3 && f[2] == p {
			return f[0], f[1], nil
		}
	}
	return "", "", fmt.Errorf("no local cluster on port %d in pg_lsclusters: %q", port, lsclusters)
}

// The suite restarts the cluster of its database URL, not the first one
// listed (which restarted a shared cluster under other tests).
func TestClusterOnPort(t *testing.T) {
	const ls = "15  main    5432 online postgres /var/lib/postgresql/15/main  /var/log/postgresql/postgresql-15-main.log\n" +
		"15  chaos   5433 online postgres /var/lib/postgresql/15/chaos /var/log/postgresql/postgresql-15-chaos.log\n"
	for port, want := range map[int]string{5432: "15/main", 5433: "15/chaos"} {
		v, n, err := clusterOnPort(ls, port)
		if err != nil || v+"/"+n != want {
			t.Fatalf("port %d: %s/%s %v, want %s", port, v, n, err, want)
		}
	}
	if _, _, err := clusterOnPort(ls, 5434); err == nil {
		t.Fatal("port 5434: found a cluster in a listing without one")
	}
}

// pgxQueryRow runs one query on a connection of its own (diagnostics of a
// run, whatever state the services' pools are in).
func pgxQueryRow(url, q string, args ...any) pgx.Row {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		cancel()
		return errRow{err}
	}
	return rowCloser{conn.QueryRow(ctx, q, args...), func() { conn.Close(context.Background()); cancel() }}
}

type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }

type rowCloser struct {
	r     pgx.Row
	close func()
}

func (r rowCloser) Scan(dst ...any) error {
	defer r.close()
	return r.r.Scan(dst...)
}
