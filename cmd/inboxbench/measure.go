package main

// What the scenarios read from the server processes: RSS from /proc, Go
// heap and other metrics from the ops server, CPU, heap and goroutine
// profiles from its pprof endpoints.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// saveProfiles writes the heap (in use) and goroutine profiles of a
// server into dir (go tool pprof reads them).
func saveProfiles(dir, ops, name string) {
	saveURL("http://"+ops+"/debug/pprof/heap", filepath.Join(dir, name+"-heap.pb.gz"))
	saveURL("http://"+ops+"/debug/pprof/goroutine", filepath.Join(dir, name+"-goroutine.pb.gz"))
}

// profileWave starts CPU profiles of every server process over the next
// d, saved into dir (no-op without dir).
func profileWave(dir string, sys *system, d time.Duration) {
	if dir == "" {
		return
	}
	for _, pr := range sys.procs {
		go saveURL(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pr.ops, int(d.Seconds())),
			filepath.Join(dir, pr.name+"-cpu.pb.gz"))
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

// forceGC makes the process behind ops collect garbage (the heap profile
// endpoint with gc=1 runs a GC first), so heap figures before and after
// compare live memory, not garbage.
func forceGC(ops string) {
	r, err := http.Get("http://" + ops + "/debug/pprof/heap?gc=1")
	if err == nil {
		_, _ = io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
}
