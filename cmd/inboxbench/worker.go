package main

// The load generator. The parent re-executes itself as `inboxbench worker`
// processes: each holds at most ~9,000 client connections (one fd each; the
// machine allows 20,000 per process) dialled from its own 127.0.0.x source
// address, so that neither the fd limit nor the ephemeral ports of one
// source address (28k) bound a scenario. The parent sends one JSON request
// per line on the worker's stdin and reads one JSON answer per line from
// its stdout (request ids match them up, so long operations such as a live
// run can be steered while they run). Latencies travel as encoded HDR
// histograms, counts as numbers. A worker exits when its stdin closes.
//
// This file is the worker's loop and its table of operations; each
// operation lives with the scenario it serves (fanout.go, storm.go, ...).

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sync"

	"github.com/inboxd/inboxd/client"
)

// ops is every operation a worker runs, by the name workerProc.call sends.
var ops = map[string]op{
	"hold":         typed((*worker).hold),        // conns.go: idle connections, device registration
	"release":      typed((*worker).release),     // conns.go
	"send":         typed((*worker).send),        // fanout.go: windowed sends (also the storm's seeding)
	"rawpub":       typed((*worker).rawPublish),  // fanout.go: the fanout baseline
	"storm":        typed((*worker).storm),       // storm.go: a login storm's devices
	"jsdrain":      typed((*worker).jsDrain),     // storm.go: the storm baseline
	"live_start":   typed((*worker).liveStart),   // live.go
	"live_stop":    typed((*worker).liveStop),    // live.go
	"seedscale":    typed((*worker).seedScale),   // scale.go
	"drain1":       typed((*worker).drain1),      // scale.go
	"soak_start":   typed((*worker).soakStart),   // soak.go
	"soak_sample":  typed((*worker).soakSample),  // soak.go
	"soak_stop":    typed((*worker).soakStop),    // soak.go
	"devices_hold": typed((*worker).devicesHold), // devices.go
	"devices_seen": typed((*worker).devicesSeen), // devices.go
}

// An op runs one request: its arguments arrive as JSON, its answer is
// marshalled back (nil: no data).
type op func(w *worker, args json.RawMessage) (any, error)

// typed makes an op of a handler with typed arguments and result.
func typed[A, R any](h func(*worker, A) (R, error)) op {
	return func(w *worker, raw json.RawMessage) (any, error) {
		var a A
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, fmt.Errorf("arguments: %w", err)
		}
		return h(w, a)
	}
}

// none is the arguments or the result of an op that has none.
type none struct{}

type wreq struct {
	ID   uint64          `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

type wresp struct {
	ID   uint64          `json:"id"`
	Err  string          `json:"err,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// worker is the state one worker process keeps between requests.
type worker struct {
	local *net.TCPAddr
	outMu sync.Mutex
	out   *bufio.Writer

	mu      sync.Mutex
	held    []*client.Client // hold without close_after, until release
	live    *liveRun         // between live_start and live_stop
	soak    *soakRun         // between soak_start and soak_stop
	devices *devicesRun      // devices_hold's online devices (devices.go)
}

func workerMain(args []string) {
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	local := fs.String("local", "", "source address of the worker's connections (127.0.0.x)")
	_ = fs.Parse(args)
	w := &worker{out: bufio.NewWriter(os.Stdout)}
	// INBOXBENCH_WORKER_PROFILE=dir: a CPU profile of each worker, to see
	// what the load generator itself costs.
	if dir := os.Getenv("INBOXBENCH_WORKER_PROFILE"); dir != "" {
		if f, err := os.Create(filepath.Join(dir, fmt.Sprintf("worker-%d.cpu.pb.gz", os.Getpid()))); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer f.Close()
		}
	}
	if *local != "" {
		w.local = &net.TCPAddr{IP: net.ParseIP(*local)}
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	var wg sync.WaitGroup
	for sc.Scan() {
		var r wreq
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			fmt.Fprintln(os.Stderr, "worker: bad request:", err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := wresp{ID: r.ID}
			if run, ok := ops[r.Op]; !ok {
				resp.Err = fmt.Sprintf("unknown op %q", r.Op)
			} else if data, err := run(w, r.Args); err != nil {
				resp.Err = err.Error()
			} else if data != nil {
				resp.Data, _ = json.Marshal(data)
			}
			b, _ := json.Marshal(resp)
			w.outMu.Lock()
			_, _ = w.out.Write(append(b, '\n'))
			_ = w.out.Flush()
			w.outMu.Unlock()
		}()
	}
	// stdin closed: the parent is done (or gone).
	w.closeHeld()
	pprof.StopCPUProfile()
	os.Exit(0)
}
