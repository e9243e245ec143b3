//go:build linux

package gateway

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"
)

// poller parks idle connections: a logged-in connection with nothing
// buffered gives up its reader goroutine and its read buffer, and its
// socket is watched by one epoll instance per gateway (EPOLLONESHOT), as
// the gobwas/ws author describes for a million connections. When the
// socket becomes readable (a frame, the peer's close), the reader is
// started again on a new goroutine. An idle connection then costs its
// socket and its session state, not a goroutine stack and a buffer.
//
// Our own code and not a library: what is needed is ~150 lines over
// x/sys/unix (register, rearm, wait), while the maintained event-loop
// libraries (gnet, nbio, cloudwego/netpoll) own the connections and their
// buffers and would replace the gateway's net.Conn, gobwas/ws framing and
// writer; mailru/easygo is unmaintained and dups the descriptor.
//
// The descriptor stays owned by the net.Conn: the runtime's poller keeps
// it, reads and writes still go through it. Closing the connection closes
// the descriptor, which removes it from the epoll set; Conn.close wakes a
// parked connection itself so that it ends like any other.
//
// The read deadline of a running reader (silence for 3 heartbeats) is, for
// a parked connection, a sweep over the parked set every sweepEvery.
type poller struct {
	epfd  int
	log   *zap.Logger
	limit time.Duration // silence after which a parked connection is closed (3 heartbeats)
	sweep time.Duration

	mu     sync.Mutex
	closed bool
	parked map[int32]*Conn // by descriptor
	gauge  func(n int)
}

func newPoller(log *zap.Logger, heartbeat time.Duration, gauge func(int)) (*poller, error) {
	fd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &poller{epfd: fd, log: log, limit: 3 * heartbeat, sweep: min(max(heartbeat/4, 50*time.Millisecond), time.Second),
		parked: make(map[int32]*Conn), gauge: gauge}, nil
}

// pollFD returns nc's descriptor when its readiness can be watched: a
// plain TCP socket. A TLS connection is not parked (its record layer
// may hold decrypted bytes the socket no longer shows), nor is anything
// else that is not a socket of its own.
func pollFD(nc net.Conn) int32 {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return -1
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := int32(-1)
	if rc.Control(func(d uintptr) { fd = int32(d) }) != nil {
		return -1
	}
	return fd
}

// park hands c's socket to the poller. false means c was not parked and
// its reader goes on; true means the reader must return: the poller (or
// close, or the sweep) starts it again.
func (p *poller) park(c *Conn) bool {
	if p == nil || c.fd < 0 {
		return false
	}
	// Registered under mu: run closes epfd under it, and a closed epfd's
	// number may be reused at once.
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	c.state.Store(connParked)
	p.parked[c.fd] = c
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP | unix.EPOLLONESHOT, Fd: c.fd}
	op := unix.EPOLL_CTL_MOD
	if !c.registered {
		op = unix.EPOLL_CTL_ADD
	}
	err := unix.EpollCtl(p.epfd, op, int(c.fd), &ev)
	if errors.Is(err, unix.ENOENT) && op == unix.EPOLL_CTL_MOD {
		err = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, int(c.fd), &ev)
	} else if errors.Is(err, unix.EEXIST) {
		err = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_MOD, int(c.fd), &ev)
	}
	if err == nil {
		c.registered = true // before mu is released: a woken reader reads it
	} else if p.parked[c.fd] == c {
		delete(p.parked, c.fd)
	}
	n := len(p.parked)
	p.mu.Unlock()
	p.gauge(n)
	if err == nil {
		return true
	}
	// Closed meanwhile (EBADF) or the set refused it: read on, the read
	// ends the connection if it is gone. Unless someone else has woken
	// it already, then that reader goes on.
	return !c.state.CompareAndSwap(connParked, connRunning)
}

// forget removes c from the parked set (when it is there under its
// descriptor; a descriptor reused by a newer connection is not touched).
func (p *poller) forget(c *Conn) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if p.parked[c.fd] == c {
		delete(p.parked, c.fd)
	}
	n := len(p.parked)
	p.mu.Unlock()
	p.gauge(n)
}

// run waits for readiness until ctx ends, and sweeps the parked
// connections for silence.
func (p *poller) run(ctx context.Context) {
	if p == nil {
		return
	}
	defer func() {
		p.mu.Lock()
		p.closed = true // park no longer registers: the descriptor number may be reused
		p.mu.Unlock()
		unix.Close(p.epfd)
	}()
	events := make([]unix.EpollEvent, 256)
	next := time.Now().Add(p.sweep)
	for ctx.Err() == nil {
		n, err := unix.EpollWait(p.epfd, events, int(p.sweep/time.Millisecond))
		if err != nil && !errors.Is(err, unix.EINTR) {
			p.log.Error("epoll_wait failed; parked connections are woken and read on goroutines", zap.Error(err))
			p.wakeAll()
			return
		}
		for i := 0; i < n; i++ {
			p.mu.Lock()
			c := p.parked[events[i].Fd]
			p.mu.Unlock()
			if c != nil {
				c.wake()
			}
		}
		if now := time.Now(); !now.Before(next) {
			p.sweepSilent(now)
			next = now.Add(p.sweep)
		}
	}
	p.wakeAll()
}

// sweepSilent closes the parked connections silent for longer than the
// limit: the running reader's read deadline, for parked connections.
func (p *poller) sweepSilent(now time.Time) {
	var silent []*Conn
	p.mu.Lock()
	for _, c := range p.parked {
		if now.Sub(time.Unix(0, c.lastRead.Load())) > p.limit {
			silent = append(silent, c)
		}
	}
	p.mu.Unlock()
	for _, c := range silent {
		c.silent()
	}
}

// wakeAll hands every parked connection back to a goroutine (at shutdown,
// or when epoll failed): nothing is left without a reader.
func (p *poller) wakeAll() {
	p.mu.Lock()
	all := make([]*Conn, 0, len(p.parked))
	for _, c := range p.parked {
		all = append(all, c)
	}
	p.mu.Unlock()
	for _, c := range all {
		c.wake()
	}
}
