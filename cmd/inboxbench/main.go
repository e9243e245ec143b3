// Command inboxbench measures inboxd end to end: real client connections
// over real sockets (the client package) against the real system, started
// by the tool as separate processes (all-in-one, or --split), with load
// generators in their own processes on their own 127.0.0.x source
// addresses. Every scenario measures its baseline in the same run on the
// same machine, so its ratio survives a noisy box. docs/benchmarks.md has
// the method, the commands and the figures.
//
//	inboxbench fanout [--group N]           send path vs raw JetStream publishes
//	inboxbench storm --users U --backlog B  U devices with B offline messages log in at once
//	inboxbench live                         live latency, idle and during a login storm
//	inboxbench conns --n N                  idle connections on one gateway process
//	inboxbench scale                        one device's drain at 100k vs 2M INBOX entries
//	inboxbench soak --duration D            steady load against short lifecycle settings: disk over time
//	inboxbench devices                      60,000 registered devices, 5,000 online: NATS memory, a node restart, a week-offline login
//	inboxbench all                          every scenario in turn (not soak)
//	inboxbench fanout|storm --cluster 3     on a 3-node NATS cluster, R1 and R3 alternately (cluster.go)
//	inboxbench report                       docs/benchmarks.md's results table from docs/benchmarks/*.jsonl (report.go)
//
// --json prints one JSON object per scenario (the contract fields first);
// --quick runs tiny sizes in seconds (what the test suite does).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/store"
)

type opts struct {
	sys     sysOpts
	json    bool
	quick   bool
	profile string
	plotDir string // live, storm: latency distributions as TSV // conns: where to save the gateway profiles

	timeout time.Duration
	workers int

	// fanout
	group, senders, window, msgs, maxPending int
	// storm, live
	users, backlog, seedGroup int
	kind                      string
	// live
	rate  float64
	pairs int
	idle  time.Duration
	// conns
	n, dialConc  int
	splitSet     bool
	freshDevices bool
	// scale
	small, large, samples int
	// soak
	duration, sampleEvery, offline                     time.Duration
	hotWindow, retention, partitionWidth, cleanupEvery time.Duration
	set                                                map[string]bool // flags given on the command line
	// --cluster (fanout, storm): R1 and R3 runs alternate this many times
	rounds int
	// devices
	registered, online, nodes int
	deviceReap                time.Duration
}

var scenarios = map[string]func(context.Context, *opts) (any, error){
	"fanout":  clustered(runFanout),
	"storm":   clustered(runStorm),
	"live":    runLive,
	"conns":   runConns,
	"scale":   runScale,
	"soak":    runSoak,
	"devices": runDevices,
}

var order = []string{"fanout", "storm", "live", "conns", "scale"}

func usage() {
	fmt.Fprintln(os.Stderr, `usage: inboxbench <fanout|storm|live|conns|scale|soak|devices|all> [flags]
       inboxbench report [--results DIR] [--out PAGE] [--check]
run "inboxbench <scenario> -h" for the flags; docs/benchmarks.md explains the method`)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "worker":
		workerMain(os.Args[2:])
		return
	case "_serve":
		serveMain(os.Args[2:])
		return
	case "report":
		reportMain(os.Args[2:])
		return
	}
	cmd := os.Args[1]
	if _, ok := scenarios[cmd]; !ok && cmd != "all" {
		usage()
	}
	o := parseFlags(cmd, os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	names := []string{cmd}
	if cmd == "all" {
		names = order
	}
	failed := false
	for _, name := range names {
		oo := *o
		res, err := scenarios[name](ctx, &oo)
		if err != nil {
			fmt.Fprintf(os.Stderr, "inboxbench %s: %v\n", name, err)
			failed = true
			if ctx.Err() != nil {
				break
			}
			continue
		}
		printResult(o.json, res)
	}
	if failed {
		os.Exit(1)
	}
}

func parseFlags(cmd string, args []string) *opts {
	o := &opts{}
	fs := newFlagSet(cmd, o, flag.ExitOnError)
	_ = fs.Parse(args)
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		o.set[f.Name] = true
		if f.Name == "split" {
			o.splitSet = true
		}
	})
	if err := checkClusterFlags(cmd, o); err != nil {
		fmt.Fprintln(os.Stderr, "inboxbench:", err)
		os.Exit(2)
	}
	if o.sys.pgAdmin == "" {
		o.sys.pgAdmin = store.DefaultURL
	}
	if o.sys.natsPass == "" && o.sys.natsUser == "" {
		o.sys.natsPass = natsauth.Password(natsauth.Admin)
	}
	if o.timeout == 0 {
		o.timeout = pick(o.quick, 60*time.Second, 10*time.Minute)
	}
	return o
}

// newFlagSet registers cmd's flags into o. The defaults are static and
// INBOXBENCH_PG is applied to the value after registering, so -h and a flag
// error (config.Usage) print no value from the environment and no secret.
func newFlagSet(cmd string, o *opts, onError flag.ErrorHandling) *flag.FlagSet {
	fs := flag.NewFlagSet("inboxbench "+cmd, onError)
	fs.BoolVar(&o.json, "json", false, "one JSON object per scenario instead of a table")
	fs.BoolVar(&o.quick, "quick", false, "tiny sizes, seconds per scenario (keeps the tool working; figures mean nothing)")
	fs.BoolVar(&o.sys.split, "split", false, "run NATS, gateway, fanout and syncer as separate processes (conns: default true)")
	fs.StringVar(&o.sys.bin, "bin", "", "directory of prebuilt inboxd, gateway, fanout, syncer binaries (default: re-execute this binary)")
	fs.StringVar(&o.sys.pgAdmin, "pg", "postgres://inboxd:inboxd@127.0.0.1:5432/postgres?sslmode=disable",
		"Postgres URL the scenario databases are created through (env INBOXBENCH_PG)")
	fs.StringVar(&o.sys.url, "url", "", "use a running system: gateway URL (tcp://host:port); needs --nats")
	fs.StringVar(&o.sys.natsURL, "nats", "", "with --url: NATS URL of the running system")
	fs.StringVar(&o.sys.natsUser, "nats-user", "", "NATS user for the admin API and the baselines (default admin)")
	fs.StringVar(&o.sys.natsPass, "nats-password", "", "its password (default $INBOXD_NATS_PASSWORD_ADMIN or the development one)")
	fs.StringVar(&o.sys.secret, "secret", auth.DevSecret, "HS256 token secret of the gateway")
	fs.IntVar(&o.sys.gwPid, "gateway-pid", 0, "with --url: pid of the gateway process (conns RSS)")
	fs.StringVar(&o.sys.gwOps, "gateway-ops", "", "with --url: ops HTTP address of the gateway (conns heap)")
	fs.StringVar(&o.sys.gwDebug, "gateway-debug", "", "with --url: debug HTTP address of the gateway, its --debug-http (a GC before the conns heap readings, --profile)")
	fs.IntVar(&o.sys.partitions, "partitions", 16, "INBOX partitions of the system")
	fs.BoolVar(&o.sys.verbose, "v", false, "progress on stderr")
	fs.BoolVar(&o.sys.keep, "keep", false, "keep the temp dir with the server logs, and the scenario's database (drop it by hand)")
	fs.StringVar(&o.plotDir, "plot-data", "", "live, storm: write latency distributions (ms, cumulative percent) as TSV files into this directory")
	fs.StringVar(&o.profile, "profile", "", "conns, storm, live: save CPU profiles of the server processes during the wave (and, conns, the gateway's heap and goroutines; storm, live, every process's /metrics text at the end; live, also CPU profiles of the idle window in DIR/idle and /metrics at its start and before the storm) into this directory")
	fs.DurationVar(&o.timeout, "timeout", 0, "bound of one storm drain (default 10m, quick 60s)")
	fs.IntVar(&o.workers, "workers", 0, "load-generator processes (default: one per 9,000 connections)")
	fs.IntVar(&o.group, "group", 0, "fanout: members per conversation (default 10)")
	fs.IntVar(&o.senders, "senders", 8, "fanout: sending connections, each on its own conversation; soak: sending devices (quick at most 4)")
	fs.IntVar(&o.window, "window", 256, "fanout: sends in flight per sender")
	fs.IntVar(&o.msgs, "msgs", 0, "fanout: messages measured (default 600,000 entries' worth)")
	fs.IntVar(&o.maxPending, "max-pending", 16384, "fanout baseline: async publishes in flight")
	fs.IntVar(&o.users, "users", 0, "storm/live: devices in the login storm (default 300; live 10,000); soak: receiving devices (default 200, quick 40)")
	fs.IntVar(&o.backlog, "backlog", 0, "storm/live/scale: offline messages per device (default 200)")
	fs.IntVar(&o.seedGroup, "seed-group", 100, "storm/live: users per group conversation the backlogs are sent to")
	fs.StringVar(&o.kind, "kind", "desktop", "storm/live: device kind of the storm devices (mobile, web, desktop)")
	fs.Float64Var(&o.rate, "rate", 0, "live, soak: messages per second (default 200; soak quick 50)")
	fs.IntVar(&o.pairs, "pairs", 20, "live: sender/receiver pairs (direct conversations)")
	fs.DurationVar(&o.idle, "idle", 0, "live: length of the idle phase (default 10s)")
	fs.IntVar(&o.n, "n", 0, "conns: connections (default 19,000)")
	fs.IntVar(&o.dialConc, "dial-concurrency", 256, "conns: dials in progress at once per worker")
	fs.BoolVar(&o.freshDevices, "fresh-devices", false, "conns: first logins (no device registered before)")
	fs.IntVar(&o.small, "small", 0, "scale: INBOX entries of the small installation (default 100,000)")
	fs.IntVar(&o.large, "large", 0, "scale: INBOX entries of the large installation (default 2,000,000)")
	fs.IntVar(&o.samples, "samples", 5, "scale: devices drained per installation (median reported)")
	fs.DurationVar(&o.duration, "duration", 0, "soak: how long the sends run (default 10m, quick 15s)")
	fs.DurationVar(&o.sampleEvery, "sample-every", 0, "soak: disk and rates sampled this often (default 1m, quick 2s)")
	fs.DurationVar(&o.offline, "offline", 0, "soak: how long a cohort of devices stays away; a cohort leaves or comes back every half of it (default 90s, quick 4s)")
	fs.DurationVar(&o.hotWindow, "hot-window", 0, "soak: the server's --hot-window (default: the server's; quick 3s; 0: not passed)")
	fs.DurationVar(&o.retention, "retention", 0, "soak: the server's --retention (default: the server's, keep forever; quick 8s; 0: not passed)")
	fs.DurationVar(&o.partitionWidth, "partition-width", 0, "soak: the server's --partition-width (default: a fifth of --retention; 0: not passed)")
	fs.DurationVar(&o.cleanupEvery, "cleanup-every", 0, "soak: the server's --cleanup-every, with a 2s --cleanup-margin and a short new-device window (default 5s, quick 1s; 0: not passed)")
	fs.IntVar(&o.sys.cluster, "cluster", 0, "fanout, storm: run on a NATS cluster of this many nodes (3), measuring R1 and R3 streams alternately (cluster.go)")
	fs.IntVar(&o.sys.replicas, "replicas", 0, "with --cluster: only this replica count (default: R1 and R3 alternately)")
	fs.IntVar(&o.rounds, "rounds", 0, "with --cluster: runs of each replica count (default 3, quick 1)")
	fs.IntVar(&o.registered, "registered", 0, "devices: registered devices, 3 per user (default 60,000, quick 300)")
	fs.IntVar(&o.online, "online", 0, "devices: of them online, one per user (default 5,000, quick 30)")
	fs.IntVar(&o.nodes, "nodes", 0, "devices: NATS nodes, 1 (R1) or 3 (a cluster, R3) (default: both in turn)")
	fs.DurationVar(&o.deviceReap, "device-reap", 0, "devices: the gateway's --device-reap (default 30s, quick 5s: the default's reaping, compressed; 0: the server's default)")
	if v := os.Getenv("INBOXBENCH_PG"); v != "" {
		o.sys.pgAdmin = v
	}
	fs.Usage = config.Usage(fs, nil)
	return fs
}

func pick[T any](quick bool, q, full T) T {
	if quick {
		return q
	}
	return full
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

func modeName(o *opts) string {
	switch {
	case o.sys.url != "":
		return "external"
	case o.sys.cluster > 0:
		return fmt.Sprintf("cluster-%d-R%d", o.sys.cluster, o.sys.replicas)
	case o.sys.split:
		return "split"
	}
	return "all-in-one"
}

// rate is n per second between two unix-ns instants.
func rate(n int64, startNs, endNs int64) float64 {
	if endNs <= startNs {
		return 0
	}
	return round3(float64(n) / (float64(endNs-startNs) / 1e9))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round3(a / b)
}

func logf(verbose bool, format string, args ...any) {
	if verbose {
		fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000")+" "+format+"\n", args...)
	}
}

// printResult prints res as one JSON line, or as a two-column table of its
// json-tagged fields.
func printResult(asJSON bool, res any) {
	if asJSON {
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
		return
	}
	v := reflect.ValueOf(res)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fmt.Fprintf(tw, "%s\t%v\n", name, v.Field(i).Interface())
	}
	fmt.Fprintf(tw, "machine\t%d CPUs shared by the system under test and the load generators\n", runtime.NumCPU())
	_ = tw.Flush()
	fmt.Println()
}
