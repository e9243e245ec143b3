package main

// The system under test. By default every scenario starts its own: a fresh
// Postgres database (inboxbench_<pid>_<n>, dropped at the end), a temp dir
// for the JetStream file store, and inboxd as separate processes so that
// their RSS and Go heap can be read (/proc/<pid>/status, the ops server's
// /metrics) without the load generator in them:
//
//   - all-in-one: one `inboxd` process (embedded NATS, gateway, fanout,
//     syncer);
//   - --split: `inboxd --nats-only` plus separate gateway, fanout and syncer
//     processes, as in a split deployment on one box.
//
// The server processes are this same executable re-executed as
// `inboxbench _serve <inboxd|gateway|fanout|syncer> ...`, which runs exactly
// what cmd/<name>/main.go runs (node.Main with the same roles and
// defaults), so the tool needs no source tree or toolchain. --bin DIR runs
// prebuilt cmd/ binaries from DIR instead (`go build -o DIR ./cmd/...`).
//
// --url (with --nats) points the tool at a running system instead; then
// nothing is started, RSS/heap figures need --gateway-pid/--gateway-ops
// (and --gateway-debug for the forced GC and profiles), and scale (which needs fresh installations) is not available.

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/streams"
)

// serveMain is `inboxbench _serve <name> [flags]`: one inboxd binary.
func serveMain(args []string) {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "_serve: which binary?")
		os.Exit(2)
	}
	name := args[0]
	os.Args = append([]string{name}, args[1:]...)
	switch name {
	case "inboxd": // cmd/inboxd
		roles := config.RoleAllInOne
		if i := slices.Index(os.Args, "--nats-only"); i > 0 {
			os.Args = slices.Delete(os.Args, i, i+1)
			roles = config.RoleEmbeddedNATS
		}
		node.Main("inboxd", roles, nil)
	case "gateway":
		node.Main("gateway", config.RoleGateway, nil)
	case "fanout":
		node.Main("fanout", config.RoleFanout, func(c *config.Config) { c.HTTPAddr = "127.0.0.1:7073" })
	case "syncer":
		node.Main("syncer", config.RoleSyncer, func(c *config.Config) { c.HTTPAddr = "127.0.0.1:7074" })
	default:
		fmt.Fprintln(os.Stderr, "_serve: unknown binary", name)
		os.Exit(2)
	}
}

type sysOpts struct {
	split      bool
	bin        string // prebuilt binaries; "" = re-exec self
	pgAdmin    string // where databases are created
	url        string // external system: gateway URL
	natsURL    string // external system: NATS URL
	natsUser   string
	natsPass   string
	secret     string
	gwPid      int
	gwOps      string
	gwDebug    string
	partitions int
	verbose    bool
	keep       bool     // keep the temp dir (server logs)
	extra      []string // extra flags for gateway-role processes
	cluster    int      // --cluster: NATS nodes (0: no cluster; cluster.go)
	replicas   int      // with cluster: the streams' replica count
}

type proc struct {
	name  string
	cmd   *exec.Cmd
	ops   string // ops HTTP address: /readyz, /metrics
	debug string // debug HTTP address: /debug/pprof ("" when unknown)
	log   string
	done  chan struct{}
}

type system struct {
	o        sysOpts
	dir      string
	dbName   string
	dbURL    string
	url      string // tcp://host:port of the gateway
	natsURL  string
	procs    []*proc
	gw       *proc // the process holding the gateway role
	nc       *nats.Conn
	js       jetstream.JetStream
	adm      *admin.Client
	external bool

	readyAddr string // when set, spawn waits for this TCP port instead of /readyz
}

var dbSeq atomic.Int64

// freeAddr returns a loopback address whose port was free a moment ago,
// below the kernel's ephemeral range (32768-60999): the tool opens
// thousands of client connections, and a port the kernel handed out with
// :0 may be the source port of one of them by the time a server binds it
// (seen: a gateway exiting with "address already in use").
func freeAddr() (string, error) {
	var err error
	for range 200 {
		addr := "127.0.0.1:" + strconv.Itoa(20000+rand.IntN(12000))
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr, nil
		}
	}
	return "", fmt.Errorf("no free port in 20000..31999: %w", err)
}

func startSystem(ctx context.Context, o sysOpts) (_ *system, err error) {
	s := &system{o: o}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	if o.url != "" {
		s.external, s.url, s.natsURL = true, o.url, o.natsURL
		if s.natsURL == "" {
			return nil, errors.New("--url needs --nats (admin API, archive progress, baselines)")
		}
		if o.gwOps != "" || o.gwDebug != "" {
			s.gw = &proc{name: "gateway", ops: o.gwOps, debug: o.gwDebug}
		}
		return s, s.connectAdmin(ctx)
	}
	if s.dir, err = os.MkdirTemp("", "inboxbench-"); err != nil {
		return nil, err
	}
	if err := s.createDB(ctx); err != nil {
		return nil, err
	}
	addrs := map[string]string{}
	for _, k := range []string{"nats", "tcp", "ws", "http", "http-gw", "http-fanout", "http-syncer"} {
		if addrs[k], err = freeAddr(); err != nil {
			return nil, err
		}
	}
	s.natsURL = "nats://" + addrs["nats"]
	s.url = "tcp://" + addrs["tcp"]
	common := []string{"--database-url", s.dbURL, "--log-level", "warn",
		"--inbox-partitions", strconv.Itoa(o.partitions), "--send-partitions", "16"}
	// The load uses few users sending fast: the per-user product limit
	// (50/s) would measure the limiter, not the path.
	// Every simulated device dials from 127.0.0.1, all at once: the caps on
	// connections before hello (per IP and in total) would measure the
	// gate, not the login path. Real devices come from many addresses.
	gwFlags := append([]string{"--tcp", addrs["tcp"], "--ws", addrs["ws"], "--send-rate", "1000000", "--send-entry-rate", "1000000000",
		"--preauth-conns", "16384", "--preauth-conns-per-ip", "16384", "--token-secret", o.secret}, o.extra...)
	if o.cluster > 0 {
		if err := s.startCluster(ctx, common, gwFlags); err != nil {
			return nil, err
		}
		if err := s.connectAdmin(ctx); err != nil {
			return nil, err
		}
		return s, s.checkClusterReplicas(ctx)
	}
	if !o.split {
		p, err := s.spawn(ctx, "inboxd", addrs["http"], append(append([]string{"--data", s.dir, "--nats-listen", addrs["nats"]}, common...), gwFlags...)...)
		if err != nil {
			return nil, err
		}
		s.gw = p
	} else {
		// Readiness of the NATS-only process is its client port: its
		// /healthz check (ReadyForConnections(0)) did not pass in older
		// builds.
		s.readyAddr = addrs["nats"]
		if _, err := s.spawn(ctx, "inboxd", addrs["http"], "--nats-only", "--data", s.dir, "--nats-listen", addrs["nats"],
			"--inbox-partitions", strconv.Itoa(o.partitions), "--log-level", "warn"); err != nil {
			return nil, err
		}
		s.readyAddr = ""
		svc := append([]string{"--nats", s.natsURL}, common...)
		// The syncer first: it serves the admin API the scenarios need.
		if _, err := s.spawn(ctx, "syncer", addrs["http-syncer"], svc...); err != nil {
			return nil, err
		}
		if _, err := s.spawn(ctx, "fanout", addrs["http-fanout"], append(svc, "--node-id", "1")...); err != nil {
			return nil, err
		}
		if s.gw, err = s.spawn(ctx, "gateway", addrs["http-gw"], append(svc, gwFlags...)...); err != nil {
			return nil, err
		}
	}
	return s, s.connectAdmin(ctx)
}

// startWith starts the system and n load generators (at least one); stop
// stops the load generators, then the system.
func startWith(ctx context.Context, o *opts, n int) (*system, pool, func(), error) {
	sys, err := startSystem(ctx, o.sys)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := startPool(n, o.sys.verbose)
	if err != nil {
		sys.stop()
		return nil, nil, nil, err
	}
	return sys, p, func() { p.stop(); sys.stop() }, nil
}

func (s *system) createDB(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.o.pgAdmin)
	if err != nil {
		return fmt.Errorf("postgres at %s: %w", s.o.pgAdmin, err)
	}
	defer conn.Close(ctx)
	s.dbName = fmt.Sprintf("inboxbench_%d_%d", os.Getpid(), dbSeq.Add(1))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+s.dbName); err != nil {
		s.dbName = ""
		return fmt.Errorf("create database: %w", err)
	}
	cfg := conn.Config()
	s.dbURL = fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", cfg.User, cfg.Password,
		net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), s.dbName)
	return nil
}

func (s *system) dropDB() {
	if s.dbName == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.o.pgAdmin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "inboxbench: drop %s: %v\n", s.dbName, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+s.dbName+" WITH (FORCE)"); err != nil {
		fmt.Fprintf(os.Stderr, "inboxbench: drop %s: %v\n", s.dbName, err)
	}
}

// spawn starts one server process and waits for its /readyz. Its profiles
// are served on a debug listener of its own (--debug-http); it stops at
// once on SIGTERM (--drain-delay 0s: no load balancer routes to it).
func (s *system) spawn(ctx context.Context, name, ops string, args ...string) (*proc, error) {
	debug, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args = append(args, "--http", ops, "--debug-http", debug, "--drain-delay", "0s")
	var cmd *exec.Cmd
	if s.o.bin != "" {
		cmd = exec.Command(filepath.Join(s.o.bin, name), args...)
	} else {
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		cmd = exec.Command(self, append([]string{"_serve", name}, args...)...)
	}
	logPath := filepath.Join(s.dir, fmt.Sprintf("%s-%d.log", name, len(s.procs)))
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	// The servers die with the tool even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, ops: ops, debug: debug, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); lf.Close(); close(p.done) }()
	s.procs = append(s.procs, p)
	logf(s.o.verbose, "started %s pid %d (ops %s, debug %s, log %s)", name, cmd.Process.Pid, ops, debug, logPath)
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited at start: %s", name, tail(logPath))
		case <-ctx.Done():
			return nil, ctx.Err()
		default:
		}
		if s.readyAddr != "" {
			if c, err := net.DialTimeout("tcp", s.readyAddr, time.Second); err == nil {
				c.Close()
				return p, nil
			}
		} else if r, err := http.Get("http://" + ops + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == 200 {
				return p, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s not healthy after 90s: %s", name, tail(logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

func (s *system) connectAdmin(ctx context.Context) error {
	user, pass := s.o.natsUser, s.o.natsPass
	if user == "" {
		user = string(natsauth.Admin)
	}
	if pass == "" {
		pass = natsauth.Password(natsauth.Admin)
	}
	s.o.natsUser, s.o.natsPass = user, pass
	var err error
	if s.nc, err = nats.Connect(s.natsURL, nats.UserInfo(user, pass)); err != nil {
		return err
	}
	if s.js, err = jetstream.New(s.nc); err != nil {
		return err
	}
	s.adm = &admin.Client{NC: s.nc}
	// The admin service may need a moment after the syncer reports healthy.
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.adm.ShowConv(cctx, 1)
		cancel()
		var ae *admin.Error
		if err == nil || errors.As(err, &ae) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("admin API: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *system) natsTarget() natsTarget {
	return natsTarget{NATS: s.natsURL, User: s.o.natsUser, Pass: s.o.natsPass}
}

func (s *system) target(kind string) target {
	return target{URL: s.url, Secret: s.o.secret, Kind: kind}
}

func (s *system) stop() {
	if s.nc != nil {
		s.nc.Close()
	}
	// Services first, NATS last (reverse start order).
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	if s.o.keep && s.dbName != "" {
		fmt.Fprintln(os.Stderr, "inboxbench: kept database", s.dbName)
	} else {
		s.dropDB()
	}
	if s.dir != "" && !s.o.keep {
		_ = os.RemoveAll(s.dir)
	} else if s.dir != "" {
		fmt.Fprintln(os.Stderr, "inboxbench: kept", s.dir)
	}
}

func (s *system) createConv(ctx context.Context, group bool, members ...int64) (int64, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := s.adm.CreateConv(cctx, admin.CreateConvRequest{Members: members, Group: group})
	if err != nil {
		return 0, fmt.Errorf("create a conversation of %d members: %w", len(members), err)
	}
	return r.ConvID, nil
}

// waitArchived waits until the archiver has copied every inbox entry (its
// consumer on each INBOX partition has nothing pending or unacknowledged):
// in steady state the archive is seconds behind the streams, and the
// catch-up path a device takes depends on it.
func (s *system) waitArchived(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var left uint64
		for p := 0; p < s.o.partitions; p++ {
			c, err := s.js.Consumer(ctx, streams.InboxStream(p), "archiver")
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				// The syncer creates its archivers after it reports ready
				// (one by one, slower on a cluster): not there yet.
				left++
				continue
			}
			if err != nil {
				return err
			}
			ci, err := c.Info(ctx)
			if err != nil {
				return err
			}
			left += ci.NumPending + uint64(ci.NumAckPending)
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("archiver still has %d entries to copy after %s", left, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// gwPid is the pid of the gateway process (0 when unknown).
func (s *system) gwPid() int {
	if s.external {
		return s.o.gwPid
	}
	if s.gw == nil {
		return 0
	}
	return s.gw.cmd.Process.Pid
}
