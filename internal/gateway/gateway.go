// Package gateway is the client edge of inboxd: WebSocket (gobwas/ws
// zero-copy upgrade) and raw TCP listeners speaking one frame format, hello
// with a signed token, and the send path to the SEND stream with results
// relayed back to the sender.
package gateway

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gobwas/ws"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/store"
)

// Gateway accepts client connections.
type Gateway struct {
	opts     Options
	log      *zap.Logger
	nc       *nats.Conn
	js       jetstream.JetStream
	st       *store.Store
	verifier *auth.Verifier
	metrics  *metrics
	sends    *sendTracker
	router   *router
	parts    *partInfos
	mirror   *cursorMirror
	bodies   *bodyCache
	kinds    *convKinds
	epoch    uint64

	resultPrefix string
	resultSub    *nats.Subscription

	mu        sync.Mutex
	lns       []net.Listener
	conns     map[*Conn]struct{}
	closeOnce sync.Once
	pageGate  *pageGate
	bnc       *nats.Conn          // backfill reads (Options.Backfill, or nc)
	bjs       jetstream.JetStream // on bnc
	wg        sync.WaitGroup
	stop      context.CancelFunc
}

// New returns a gateway; Start opens its listeners.
func New(opts Options, log *zap.Logger, nc *nats.Conn, st *store.Store, verifier *auth.Verifier, reg prometheus.Registerer) (*Gateway, error) {
	opts.setDefaults()
	g := &Gateway{
		opts:         opts,
		log:          log,
		nc:           nc,
		st:           st,
		verifier:     verifier,
		metrics:      newMetrics(reg),
		epoch:        uint64(time.Now().UnixNano()),
		resultPrefix: "_INBOXD.gw." + opts.ID + ".",
		conns:        make(map[*Conn]struct{}),
	}
	g.sends = newSendTracker(g)
	g.router = newRouter(g)
	g.pageGate = newPageGate(pageSlots)
	g.parts = &partInfos{g: g, m: make([]partInfo, opts.Layout.InboxPartitions)}
	g.mirror = &cursorMirror{g: g}
	g.bodies = newBodyCache(opts.BodyCacheEntries, st.Bodies)
	g.kinds = &convKinds{g: g}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(8192),
		jetstream.WithPublishAsyncTimeout(10*time.Second),
		jetstream.WithPublishAsyncAckHandler(g.sends.onPubAck),
		jetstream.WithPublishAsyncErrHandler(g.sends.onPubErr),
	)
	if err != nil {
		return nil, err
	}
	g.js = js
	g.bnc, g.bjs = nc, js
	if opts.Backfill != nil {
		if g.bjs, err = jetstream.New(opts.Backfill); err != nil {
			return nil, err
		}
		g.bnc = opts.Backfill
	}
	return g, nil
}

// Start subscribes to send results and opens the listeners.
func (g *Gateway) Start(ctx context.Context) error {
	ctx, g.stop = context.WithCancel(ctx)
	sub, err := g.nc.Subscribe(g.resultPrefix+"*", g.sends.onResult)
	if err != nil {
		return fmt.Errorf("gateway: subscribe results: %w", err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	g.resultSub = sub
	g.parts.refresh(ctx)
	g.wg.Add(3)
	go func() {
		defer g.wg.Done()
		g.sends.run(ctx)
	}()
	go func() {
		defer g.wg.Done()
		g.parts.run(ctx, 250*time.Millisecond)
	}()
	go func() {
		defer g.wg.Done()
		g.mirror.run(ctx, time.Second)
	}()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.watchReconnects(ctx)
	}()

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
	g.log.Info("gateway listening", zap.String("websocket", "ws://"+wsl.Addr().String()+g.opts.WSPath),
		zap.String("tcp", tcp.Addr().String()), zap.String("id", g.opts.ID))
	return nil
}

// TCPAddr and WSURL return the bound addresses (useful with port 0).
func (g *Gateway) TCPAddr() string { return g.lns[0].Addr().String() }

// WSURL returns the WebSocket URL of the gateway.
func (g *Gateway) WSURL() string {
	scheme := "ws://"
	if g.opts.TLS != nil {
		scheme = "wss://"
	}
	return scheme + g.lns[1].Addr().String() + g.opts.WSPath
}

// Connections returns the number of open client connections.
func (g *Gateway) Connections() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.conns)
}

// Shutdown closes the listeners and every connection. Clients reconnect
// elsewhere and resume from their cursors.
func (g *Gateway) Shutdown() {
	g.mu.Lock()
	for _, ln := range g.lns {
		ln.Close()
	}
	conns := make([]*Conn, 0, len(g.conns))
	for c := range g.conns {
		conns = append(conns, c)
	}
	g.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	if g.stop != nil {
		g.stop()
	}
	if g.resultSub != nil {
		_ = g.resultSub.Unsubscribe()
	}
	g.wg.Wait()
	g.closeOnce.Do(func() { close(g.router.done) })
}

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
		go serve(nc)
	}
}

func (g *Gateway) track(c *Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.lns) == 0 {
		return false
	}
	g.conns[c] = struct{}{}
	g.metrics.connections.Inc()
	return true
}

func (g *Gateway) forget(c *Conn) {
	g.mu.Lock()
	if _, ok := g.conns[c]; ok {
		delete(g.conns, c)
		g.metrics.connections.Dec()
	}
	g.mu.Unlock()
	g.sends.forget(c)
}

// readBufSize is a connection's read buffer: client frames are small (acks,
// pings, sends of a few hundred bytes); larger ones are read past it.
const readBufSize = 1024

func (g *Gateway) serveTCP(nc net.Conn) {
	tr := &tcpTransport{r: bufio.NewReaderSize(nc, readBufSize), max: g.opts.MaxFrame}
	c := newConn(g, nc, tr)
	if g.track(c) {
		c.serve()
	} else {
		nc.Close()
	}
}

func (g *Gateway) serveWS(nc net.Conn) {
	_ = nc.SetDeadline(time.Now().Add(g.opts.HelloTimeout))
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
	if _, err := u.Upgrade(nc); err != nil {
		g.metrics.upgradeFailures.Inc()
		nc.Close()
		return
	}
	_ = nc.SetDeadline(time.Time{})
	tr := &wsTransport{r: bufio.NewReaderSize(nc, readBufSize), max: g.opts.MaxFrame}
	c := newConn(g, nc, tr)
	tr.ctl = func(raw []byte) { c.enqueue(outItem{raw: raw}) }
	if g.track(c) {
		c.serve()
	} else {
		nc.Close()
	}
}

func utf8Valid(s string) bool { return utf8.ValidString(s) }

// watchReconnects makes every session re-read its tail after the gateway's
// NATS connection came back: live announcements (core NATS, at most once)
// sent while it was away are lost, the inbox entries are not.
func (g *Gateway) watchReconnects(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	reconnects := func() uint64 {
		n := g.nc.Stats().Reconnects
		if g.bnc != g.nc {
			n += g.bnc.Stats().Reconnects
		}
		return n
	}
	last := reconnects()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n := reconnects(); n != last {
				last = n
				for _, s := range g.router.all() {
					s.tailCheck()
				}
			}
		}
	}
}

// Sessions returns the state of uid's sessions on this gateway (all when uid is 0).
func (g *Gateway) Sessions(uid int64) []SessionState {
	var out []SessionState
	for _, s := range g.router.all() {
		if uid == 0 || s.uid == uid {
			out = append(out, s.State())
		}
	}
	return out
}
