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

// serverCPU is the CPU time (user + system, from /proc) the server side
// has used so far: the system's processes (with their children) and every
// Postgres process of the machine (the bench's cluster; run nothing else on
// it meanwhile). It counts what a message costs, not what the load
// generators spend.
type serverCPU struct {
	Inboxd   time.Duration
	Postgres time.Duration
}

// clockTick is the unit of /proc/<pid>/stat's times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

func readServerCPU(sys *system) serverCPU {
	var c serverCPU
	mine := map[int]bool{}
	for _, p := range sys.procs {
		if p.cmd != nil && p.cmd.Process != nil {
			mine[p.cmd.Process.Pid] = true
		}
	}
	if sys.external && sys.o.gwPid > 0 {
		mine[sys.o.gwPid] = true
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return c
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime(14) stime(15)
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		comm, f := s[open+1:end], strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		// The postmaster's children's times hold the backends that ended.
		cut, _ := strconv.ParseInt(f[13], 10, 64)
		cst, _ := strconv.ParseInt(f[14], 10, 64)
		d := time.Duration(ut+st) * clockTick
		if comm == "postgres" {
			d += time.Duration(cut+cst) * clockTick
		}
		switch {
		case mine[pid] || mine[ppid]:
			c.Inboxd += d
		case comm == "postgres":
			c.Postgres += d
		}
	}
	return c
}

// perUnit is the CPU between a and b per unit of work, in µs.
func perUnit(a, b serverCPU, units int64) (total, inboxd, postgres float64) {
	if units <= 0 {
		return 0, 0, 0
	}
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(units) }
	i, p := b.Inboxd-a.Inboxd, b.Postgres-a.Postgres
	return us(i + p), us(i), us(p)
}
