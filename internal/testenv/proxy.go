package testenv

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy for fault tests: it forwards connections to a target
// and can turn them into half-open ones (bytes stop flowing both ways, no
// FIN, no RST), as a NAT that forgot the mapping or a dead peer would.
type Proxy struct {
	ln     net.Listener
	target string
	black  atomic.Bool
	back   func(accepted time.Time, client, server net.Conn) // nil: a copy
	mu     sync.Mutex
	conns  []net.Conn
}

// StartProxy forwards a free local port to target until the test ends.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	return StartProxyFunc(t, target, nil)
}

// StartProxyFunc is StartProxy with back in place of the copy of what the
// target sends to the client (a test that reads the frames on the way):
// it is called for each connection with the time it was accepted, reads
// server and writes client; the proxy closes the client's side when it
// returns. Blackhole does not apply to what back copies.
func StartProxyFunc(t testing.TB, target string, back func(accepted time.Time, client, server net.Conn)) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, target: target, back: back}
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Blackhole makes every current and future connection silent: nothing is
// forwarded, nothing is closed.
func (p *Proxy) Blackhole(on bool) { p.black.Store(on) }

// Cut closes every current connection through the proxy, both sides (the
// client sees its socket end with no close frame), and returns how many
// client connections it cut; new ones are accepted as before.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	n := len(p.conns) / 2
	p.conns = nil
	return n
}

// Close closes the listener and every connection.
func (p *Proxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *Proxy) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		at := time.Now()
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		if p.back != nil {
			go func() {
				defer in.Close()
				p.back(at, in, out)
			}()
		} else {
			go p.pipe(in, out)
		}
		go p.pipe(out, in)
	}
}

func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.black.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			// A half-open path forwards no FIN (nor RST) either.
			if p.black.Load() {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok && err == io.EOF {
				_ = tc.CloseWrite()
			} else {
				dst.Close() // a reset (a peer killed with unread data): pass it on
			}
			return
		}
	}
}
