package main

// What the scenarios read from the server processes: RSS from /proc, Go
// heap and other metrics from the ops server (--http), CPU, heap and
// goroutine profiles from the pprof endpoints of its debug server
// (--debug-http).

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// rss reads VmRSS of pid in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) > 0 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb * 1024, err
			}
		}
	}
	return 0, errors.New("no VmRSS")
}

// metric reads an unlabelled gauge or counter from an ops server.
func metric(ops, name string) (float64, error) {
	r, err := http.Get("http://" + ops + "/metrics")
	if err != nil {
		return 0, err
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("metric %s not found", name)
}

// saveProfiles writes the heap (in use) and goroutine profiles of the
// server with debug HTTP at debug into dir (go tool pprof reads them).
func saveProfiles(dir, debug, name string) {
	if debug == "" {
		logf(true, "profile %s: no debug address of the server (--gateway-debug)", name)
		return
	}
	saveURL("http://"+debug+"/debug/pprof/heap", filepath.Join(dir, name+"-heap.pb.gz"))
	saveURL("http://"+debug+"/debug/pprof/goroutine", filepath.Join(dir, name+"-goroutine.pb.gz"))
}

// profileWave starts CPU profiles of every server process over the next
// d, saved into dir (no-op without dir), and returns a func that waits for
// them: a scenario defers it so that the system is not stopped under a
// profile still being taken (quick runs end before d).
func profileWave(dir string, sys *system, d time.Duration) (wait func()) {
	var wg sync.WaitGroup
	if dir == "" {
		return wg.Wait
	}
	for _, pr := range sys.procs {
		wg.Go(func() {
			saveURL(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pr.debug, int(d.Seconds())),
				filepath.Join(dir, pr.name+"-cpu.pb.gz"))
		})
	}
	return wg.Wait
}

// saveMetrics writes the /metrics text of every server process into dir
// (no-op without dir): what the gateway counted over the run, e.g. its
// backfill pages by source and its consumer requests by op.
func saveMetrics(dir string, sys *system, scenario string) {
	if dir == "" {
		return
	}
	procs := sys.procs
	if len(procs) == 0 && sys.gw != nil {
		procs = []*proc{sys.gw} // --url: the gateway's --gateway-ops
	}
	for _, pr := range procs {
		if pr.ops != "" {
			saveURL("http://"+pr.ops+"/metrics", filepath.Join(dir, scenario+"-"+pr.name+"-metrics.txt"))
		}
	}
}

// saveURL writes the body of a GET into path (profiles; failures are
// logged, the benchmark goes on).
func saveURL(url, path string) {
	_ = os.MkdirAll(filepath.Dir(path), 0o755)
	r, err := http.Get(url)
	if err != nil {
		logf(true, "profile %s: %v", url, err)
		return
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		logf(true, "profile %s: %v", path, err)
	}
}

// forceGC makes the process with debug HTTP at debug collect garbage (the
// heap profile endpoint with gc=1 runs a GC first), so heap figures before
// and after compare live memory, not garbage. Without a debug address the
// figures include garbage.
func forceGC(debug string) {
	if debug == "" {
		return
	}
	r, err := http.Get("http://" + debug + "/debug/pprof/heap?gc=1")
	if err == nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
}
