package gateway

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/gobwas/ws"
	"go.uber.org/zap"
)

// listen opens the raw TCP and the WebSocket listeners (TLS when
// configured) and starts accepting on both.
func (g *Gateway) listen() error {
	tcp, err := net.Listen("tcp", g.opts.TCPAddr)
	if err != nil {
		return fmt.Errorf("gateway: listen tcp %s: %w", g.opts.TCPAddr, err)
	}
	wsl, err := net.Listen("tcp", g.opts.WSAddr)
	if err != nil {
		tcp.Close()
		return fmt.Errorf("gateway: listen websocket %s: %w", g.opts.WSAddr, err)
	}
	if g.opts.TLS != nil {
		tcp, wsl = tls.NewListener(tcp, g.opts.TLS), tls.NewListener(wsl, g.opts.TLS)
	}
	g.mu.Lock()
	g.lns = []net.Listener{tcp, wsl}
	g.mu.Unlock()
	g.wg.Add(2)
	go g.acceptLoop(tcp, g.serveTCP)
	go g.acceptLoop(wsl, g.serveWS)
	g.log.Info("gateway listening", zap.String("websocket", g.WSURL()),
		zap.String("tcp", tcp.Addr().String()), zap.String("id", g.opts.ID))
	return nil
}

// TCPAddr returns the bound raw TCP address (useful with port 0).
func (g *Gateway) TCPAddr() string { return g.lns[0].Addr().String() }

// WSURL returns the WebSocket URL of the gateway.
func (g *Gateway) WSURL() string {
	scheme := "ws://"
	if g.opts.TLS != nil {
		scheme = "wss://"
	}
	return scheme + g.lns[1].Addr().String() + g.opts.WSPath
}

// acceptLoop accepts until ln is closed.
func (g *Gateway) acceptLoop(ln net.Listener, serve func(net.Conn)) {
	defer g.wg.Done()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends: back off instead of spinning.
			delay = min(max(delay*2, 5*time.Millisecond), time.Second)
			g.log.Warn("accept", zap.Error(err), zap.Duration("retry_in", delay))
			time.Sleep(delay)
			continue
		}
		delay = 0
		// Before any goroutine or buffer: a connection over the caps on
		// connections that have not finished hello is closed at once.
		if !g.limits.preauth.admit(nc) {
			nc.Close()
			continue
		}
		go serve(nc)
	}
}

// readBufSize is a connection's read buffer: client frames are small (acks,
// pings, sends of a few hundred bytes); larger ones are read past it.
const readBufSize = 1024

func (g *Gateway) serveTCP(nc net.Conn) {
	defer g.limits.preauth.done(nc)
	tr := &tcpTransport{src: nc, max: g.opts.MaxFrame}
	c := newConn(g, nc, tr)
	if g.track(c) {
		c.serve()
	} else {
		nc.Close()
	}
}

// serveWS upgrades nc (gobwas/ws, zero-copy: no http.Request) on the
// configured path, within the hello timeout; a request for the web client
// (/app, not an upgrade) goes to its HTTP server instead.
func (g *Gateway) serveWS(nc net.Conn) {
	_ = nc.SetDeadline(time.Now().Add(g.opts.HelloTimeout))
	br := reader(nil, nc)
	if g.web != nil && isAppRequest(br) {
		// The web client (webapp.go); nc counts before hello until closed.
		g.web.serve(nc, br, func() { g.limits.preauth.done(nc) })
		return
	}
	defer g.limits.preauth.done(nc)
	u := ws.Upgrader{
		OnRequest: func(uri []byte) error {
			path := uri
			for i, b := range uri {
				if b == '?' {
					path = uri[:i]
					break
				}
			}
			if string(path) != g.opts.WSPath {
				return ws.RejectConnectionError(ws.RejectionStatus(404), ws.RejectionReason("no websocket endpoint here; use "+g.opts.WSPath))
			}
			return nil
		},
	}
	if _, err := u.Upgrade(struct {
		io.Reader
		io.Writer
	}{br, nc}); err != nil {
		g.metrics.upgradeFailures.Inc()
		nc.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	tr := &wsTransport{src: nc, r: br, max: g.opts.MaxFrame}
	c := newConn(g, nc, tr)
	tr.ctl = func(raw []byte) { c.enqueue(outItem{raw: raw}) }
	if g.track(c) {
		c.serve()
	} else {
		nc.Close()
	}
}
