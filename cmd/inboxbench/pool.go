package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// maxConnsPerWorker keeps a worker well below the 20,000 fds a process may
// open on the benchmark machine (one fd per connection, plus a few).
const maxConnsPerWorker = 9000

// workerProc is the parent's handle on one load-generator process.
type workerProc struct {
	local string
	cmd   *exec.Cmd
	in    io.WriteCloser
	mu    sync.Mutex
	next  uint64
	wait  map[uint64]chan wresp
	dead  chan struct{}
}

// nextSource hands out 127.0.0.2, 127.0.0.3, ...: every worker dials from
// its own source address (the whole 127/8 is loopback on Linux).
var (
	sourceMu   sync.Mutex
	sourceNext = 2
)

func nextSource() string {
	sourceMu.Lock()
	defer sourceMu.Unlock()
	ip := fmt.Sprintf("127.0.%d.%d", sourceNext/254, sourceNext%254)
	sourceNext++
	if sourceNext%254 == 0 {
		sourceNext++ // skip .0 host numbers
	}
	return ip
}

func startWorker(verbose bool) (*workerProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	w := &workerProc{local: nextSource(), wait: map[uint64]chan wresp{}, dead: make(chan struct{})}
	w.cmd = exec.Command(self, "worker", "--local", w.local)
	w.cmd.Stderr = os.Stderr
	w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if w.in, err = w.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := w.cmd.Start(); err != nil {
		return nil, err
	}
	logf(verbose, "worker pid %d dials from %s", w.cmd.Process.Pid, w.local)
	go func() {
		defer close(w.dead)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<30)
		for sc.Scan() {
			var r wresp
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				continue
			}
			w.mu.Lock()
			ch := w.wait[r.ID]
			delete(w.wait, r.ID)
			w.mu.Unlock()
			if ch != nil {
				ch <- r
			}
		}
	}()
	return w, nil
}

// call runs op on the worker and decodes its answer into out (may be nil).
func (w *workerProc) call(op string, args, out any) error {
	raw, err := json.Marshal(args)
	if err != nil {
		return err
	}
	ch := make(chan wresp, 1)
	w.mu.Lock()
	w.next++
	id := w.next
	w.wait[id] = ch
	b, _ := json.Marshal(wreq{ID: id, Op: op, Args: raw})
	_, err = w.in.Write(append(b, '\n'))
	w.mu.Unlock()
	if err != nil {
		return fmt.Errorf("worker %s: %w", w.local, err)
	}
	select {
	case r := <-ch:
		if r.Err != "" {
			return fmt.Errorf("worker %s: %s: %s", w.local, op, r.Err)
		}
		if out != nil && r.Data != nil {
			return json.Unmarshal(r.Data, out)
		}
		return nil
	case <-w.dead:
		return fmt.Errorf("worker %s: exited during %s", w.local, op)
	}
}

func (w *workerProc) stop() {
	_ = w.in.Close()
	done := make(chan struct{})
	go func() { _ = w.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = w.cmd.Process.Kill()
		<-done
	}
}

type pool []*workerProc

// startPool starts n workers (at least one).
func startPool(n int, verbose bool) (pool, error) {
	var p pool
	for i := 0; i < max(n, 1); i++ {
		w, err := startWorker(verbose)
		if err != nil {
			p.stop()
			return nil, err
		}
		p = append(p, w)
	}
	return p, nil
}

func (p pool) stop() {
	var wg sync.WaitGroup
	for _, w := range p {
		wg.Add(1)
		go func() { defer wg.Done(); w.stop() }()
	}
	wg.Wait()
}

// each runs f for every worker concurrently and returns the first error.
func (p pool) each(f func(i int, w *workerProc) error) error {
	errs := make([]error, len(p))
	var wg sync.WaitGroup
	for i, w := range p {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(i, w) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// workersFor is how many workers n connections need.
func workersFor(n int) int { return max(1, (n+maxConnsPerWorker-1)/maxConnsPerWorker) }

// split divides [0, n) into k nearly equal consecutive ranges.
func split(n, k int) [][2]int {
	out := make([][2]int, k)
	for i := range out {
		out[i] = [2]int{n * i / k, n * (i + 1) / k}
	}
	return out
}
