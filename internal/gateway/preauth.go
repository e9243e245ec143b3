package gateway

import (
	"net"
	"net/netip"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// preauthGate bounds the connections that have not finished hello: in
// total and per remote address. Such a connection costs a file descriptor
// and a goroutine for up to the hello timeout without naming any user, so
// no per-user limit applies to it; over either cap the gateway closes it
// at once (counted by cap). A connection stops counting when its hello
// ends, logged in or refused. IPv6 addresses count per /64, the block one
// host usually holds.
type preauthGate struct {
	total, perIP int
	gauge        prometheus.Gauge
	refused      *prometheus.CounterVec

	mu    sync.Mutex
	conns map[net.Conn]netip.Addr
	byIP  map[netip.Addr]int
}

func newPreauthGate(total, perIP int, gauge prometheus.Gauge, refused *prometheus.CounterVec) *preauthGate {
	return &preauthGate{total: total, perIP: perIP, gauge: gauge, refused: refused,
		conns: make(map[net.Conn]netip.Addr), byIP: make(map[netip.Addr]int)}
}

// remoteKey is the address a connection counts under.
func remoteKey(nc net.Conn) netip.Addr {
	var a netip.Addr
	switch ra := nc.RemoteAddr().(type) {
	case nil:
	case *net.TCPAddr:
		a = ra.AddrPort().Addr().Unmap()
	default:
		if ap, err := netip.ParseAddrPort(ra.String()); err == nil {
			a = ap.Addr().Unmap()
		}
	}
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			a = p.Addr()
		}
	}
	return a
}

// admit counts a just accepted connection; false means it is over a cap
// and must be closed.
func (p *preauthGate) admit(nc net.Conn) bool {
	ip := remoteKey(nc)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case len(p.conns) >= p.total:
		p.refused.WithLabelValues("total").Inc()
		return false
	case p.byIP[ip] >= p.perIP:
		p.refused.WithLabelValues("per_ip").Inc()
		return false
	}
	p.conns[nc] = ip
	p.byIP[ip]++
	p.gauge.Set(float64(len(p.conns)))
	return true
}

// done ends nc's count (once; later calls do nothing).
func (p *preauthGate) done(nc net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ip, ok := p.conns[nc]
	if !ok {
		return
	}
	delete(p.conns, nc)
	if p.byIP[ip]--; p.byIP[ip] <= 0 {
		delete(p.byIP, ip)
	}
	p.gauge.Set(float64(len(p.conns)))
}
