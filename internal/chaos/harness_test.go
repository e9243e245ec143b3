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
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/powercut"
)

// harness is the system under test: the service processes and Postgres.
// The single-node run has one NATS server, one gateway and one fanout; the
// cluster run (cluster_test.go) three NATS nodes, two gateways, two fanouts.
type harness struct {
	t         *testing.T
	dir       string
	bin       string // the built inboxd, gateway, fanout, syncer
	dbURL     string
	nats      []*proc // NATS servers
	natsNames []string
	natsPorts []int
	gateways  []*proc
	tcpPorts  []int
	httpGWs   []string
	debugGWs  []string // the gateways' --debug-http: /debug/sessions, /debug/pprof
	fanouts   []*proc
	syncer    *proc
	procs     []*proc // in start order (stopped in reverse)
	// disks are the NATS servers' stores: power-cut file systems, whose
	// unsynced writes a power-cut fault drops.
	disks []*powercut.FS
}

// newHarness builds the binaries and registers the cleanup that stops
// every process (services before NATS) and shows the logs of a failed run.
func newHarness(t *testing.T) *harness {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	out, err := exec.Command("go", "build", "-o", bin+"/", "../../cmd/inboxd", "../../cmd/gateway", "../../cmd/fanout", "../../cmd/syncer").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	h := &harness{t: t, dir: dir, bin: bin, dbURL: testenv.Database(t)}
	t.Cleanup(func() {
		for i := len(h.procs) - 1; i >= 0; i-- {
			h.procs[i].stop()
		}
		if t.Failed() {
			// The whole logs outlive the test's directory; the tails follow.
			keep, _ := os.MkdirTemp("", "inboxd-chaos-logs-")
			for _, p := range h.procs {
				b, _ := os.ReadFile(filepath.Join(dir, p.name+".log"))
				if keep != "" {
					_ = os.WriteFile(filepath.Join(keep, p.name+".log"), b, 0o644)
				}
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("--- %s.log (tail)\n%s", p.name, b)
			}
			if keep != "" {
				t.Logf("the whole logs: %s", keep)
			}
		}
	})
	return h
}

func (h *harness) start(name, bin string, args ...string) *proc {
	p := newProc(h.t, h.dir, name, filepath.Join(h.bin, bin), args...)
	h.procs = append(h.procs, p)
	return p
}

// startGateway starts a gateway (name gateway, gateway2, ...) on ports of
// its own.
func (h *harness) startGateway(pl plan, natsURL string, common []string) {
	name := "gateway"
	if n := len(h.gateways); n > 0 {
		name += strconv.Itoa(n + 1)
	}
	tcp := testenv.FreePort(h.t)
	httpAddr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(h.t))
	debug := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(h.t))
	h.tcpPorts, h.httpGWs, h.debugGWs = append(h.tcpPorts, tcp), append(h.httpGWs, httpAddr), append(h.debugGWs, debug)
	h.gateways = append(h.gateways, h.start(name, "gateway", append([]string{"--nats", natsURL, "--tcp", "127.0.0.1:" + strconv.Itoa(tcp),
		"--ws", "127.0.0.1:0", "--http", httpAddr, "--debug-http", debug, "--heartbeat", "2s", "--token-secret", testenv.Secret,
		"--new-device-max", "1000000000", "--send-rate", "100000", "--pull-rate", "1000",
		"--offline-threshold", strconv.Itoa(pl.offlineThreshold)}, common...)...))
}

func startHarness(t *testing.T, pl plan) *harness {
	h := newHarness(t)
	h.natsPorts, h.natsNames = []int{testenv.FreePort(t)}, []string{"nats"}
	natsURL := h.natsURL()
	// --drain-delay 0s: no load balancer watches these processes, and a
	// SIGTERM'd one should go at once.
	common := []string{"--database-url", h.dbURL, "--inbox-partitions", "4", "--send-partitions", "4", "--log-level", "warn", "--drain-delay", "0s"}
	store := h.mountDisk("nats")
	h.nats = []*proc{h.start("nats", "inboxd", "--nats-only", "--data", store,
		"--nats-listen", "127.0.0.1:"+strconv.Itoa(h.natsPorts[0]), "--http", "127.0.0.1:0", "--drain-delay", "0s")}
	h.startGateway(pl, natsURL, common)
	h.fanouts = []*proc{h.start("fanout", "fanout", append([]string{"--nats", natsURL, "--http", "127.0.0.1:0"}, common...)...)}
	h.syncer = h.start("syncer", "syncer", append([]string{"--nats", natsURL, "--http", "127.0.0.1:0"}, common...)...)
	h.waitHealthy(60 * time.Second)
	return h
}

// writebackEvery is how often the model's kernel writes dirty pages back
// (Linux writes back what has been dirty for 30 s; this is shorter, so that
// a cut loses seconds of writes, not the whole run).
const writebackEvery = 10 * time.Second

// mountDisk makes a NATS server's store dir h.dir/name on a power-cut
// file system (its backing dir beside it) and returns the dir. The
// kernel's writeback is modelled by a sync of everything every
// writebackEvery; a power cut drops what came since (whole pages, a torn
// last one).
func (h *harness) mountDisk(name string) string {
	store, backing := filepath.Join(h.dir, name), filepath.Join(h.dir, name+"-disk")
	for _, d := range []string{store, backing} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			h.t.Fatal(err)
		}
	}
	disk := powercut.MountT(h.t, backing, store, powercut.Options{Seed: time.Now().UnixNano(), Logf: func(string, ...any) {}})
	h.disks = append(h.disks, disk)
	go writeback(h.t.Context(), disk)
	return store
}

// writeback syncs disk every writebackEvery until ctx ends.
func writeback(ctx context.Context, disk *powercut.FS) {
	t := time.NewTicker(writebackEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = disk.Sync() // fails while the power is cut: nothing to write then
		}
	}
}

// powerCut cuts the power of every box at once: the NATS stores lose what
// they had not synced (the cut), every process dies, and, with
// withPostgres, Postgres crashes (an immediate stop: it keeps what it
// committed, as its WAL is fsynced). After down the power comes back and
// everything starts again, NATS first.
func (h *harness) powerCut(down time.Duration, withPostgres bool) (powercut.CutReport, error) {
	var rep powercut.CutReport
	for _, d := range h.disks {
		r := d.Cut()
		rep.FilesTouched += r.FilesTouched
		rep.PagesDropped += r.PagesDropped
		rep.PagesKept += r.PagesKept
		rep.BytesDropped += r.BytesDropped
		rep.TornFiles += r.TornFiles
	}
	var wg sync.WaitGroup
	for _, p := range h.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.kill()
		}()
	}
	wg.Wait()
	var err error
	if withPostgres {
		err = crashPostgres(h.dbURL)
	}
	for _, d := range h.disks {
		d.Resume()
	}
	time.Sleep(down)
	for _, p := range h.procs {
		p.up()
	}
	return rep, err
}

// fences counts the syncer's log lines that say an INBOX stream was found
// behind Postgres and fenced (the syncer restarts with every power cut, so
// its counters start over).
func (h *harness) fences() int {
	b, _ := os.ReadFile(filepath.Join(h.dir, "syncer.log"))
	return strings.Count(string(b), "INBOX stream fenced")
}

// waitHealthy waits until every gateway reports healthy.
func (h *harness) waitHealthy(within time.Duration) time.Duration {
	start := time.Now()
	for _, gw := range h.httpGWs {
		for {
			resp, err := http.Get("http://" + gw + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if time.Since(start) > within {
				h.t.Fatalf("gateway %s not healthy after %s", gw, within)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return time.Since(start)
}

// natsURL is every NATS server's client URL, comma separated (what the
// services' --nats takes).
func (h *harness) natsURL() string {
	urls := make([]string, len(h.natsPorts))
	for i, p := range h.natsPorts {
		urls[i] = "nats://127.0.0.1:" + strconv.Itoa(p)
	}
	return strings.Join(urls, ",")
}

// tcpAddr is gateway i's (modulo the gateways) TCP listen address.
func (h *harness) tcpAddr(i int) string {
	return "127.0.0.1:" + strconv.Itoa(h.tcpPorts[i%len(h.tcpPorts)])
}

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

// crashPostgres stops the local cluster that serves url as a crash would
// (immediate: no checkpoint, recovery from the WAL at the next start) and
// starts it again.
func crashPostgres(url string) error {
	version, name, err := clusterOf(url)
	if err != nil {
		return err
	}
	if b, err := exec.Command("pg_ctlcluster", version, name, "restart", "-m", "immediate").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctlcluster %s %s restart -m immediate: %w: %s", version, name, err, b)
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
