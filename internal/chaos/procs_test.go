package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is a supervised service process: it is restarted when it exits,
// unless it is held down (a fault in progress) or the run is over.
type proc struct {
	name string
	bin  string
	args []string
	log  *os.File

	mu      sync.Mutex
	cmd     *exec.Cmd
	down    bool // held down by a fault
	stopped bool
	exited  chan struct{}
	starts  int
}

func newProc(t *testing.T, dir, name, bin string, args ...string) *proc {
	f, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, bin: bin, args: args, log: f}
	p.start()
	go p.supervise()
	return p
}

func (p *proc) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited != nil {
		select {
		case <-p.exited:
		default:
			return // running already
		}
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(p.log, "chaos: start %s: %v\n", p.name, err)
		return
	}
	p.cmd, p.exited = cmd, make(chan struct{})
	p.starts++
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		close(exited)
	}(cmd, p.exited)
}

// supervise restarts the process whenever it exits on its own (a start
// that failed because a dependency was down, for instance).
func (p *proc) supervise() {
	for {
		p.mu.Lock()
		exited, stopped := p.exited, p.stopped
		p.mu.Unlock()
		if stopped {
			return
		}
		if exited != nil {
			<-exited
		}
		time.Sleep(300 * time.Millisecond)
		p.mu.Lock()
		restart := !p.down && !p.stopped && p.exited == exited
		p.mu.Unlock()
		if restart {
			p.start()
		}
	}
}

// kill sends SIGKILL and holds the process down until up.
func (p *proc) kill() {
	p.signal(syscall.SIGKILL, true)
}

func (p *proc) signal(sig syscall.Signal, hold bool) {
	p.mu.Lock()
	p.down = hold
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	}
}

// pause stops the process (SIGSTOP: it holds its sockets and its state,
// answers nothing) for d, then lets it go on (SIGCONT).
func (p *proc) pause(d time.Duration) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGSTOP)
	time.Sleep(d) // the pause itself: time passes
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
}

// up starts a held-down process again.
func (p *proc) up() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
	p.start()
}

func (p *proc) stop() {
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	p.signal(syscall.SIGTERM, true)
	p.log.Close()
}
