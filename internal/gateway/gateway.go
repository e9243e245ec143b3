// Package gateway is the client edge of inboxd: WebSocket (gobwas/ws
// zero-copy upgrade) and raw TCP listeners speaking one frame format, hello
// with a signed token, and the send path to the SEND stream with results
// relayed back to the sender.
package gateway

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/ops"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// Gateway accepts client connections.
type Gateway struct {
	opts     Options
	log      *zap.Logger
	nc       *nats.Conn
	js       jetstream.JetStream
	st       *store.Store        // catch-up reads
	sst      *store.Store        // the send path (Options.SendStore, or st)
	logins   *store.LoginBatcher // logins read in batches, on st
	verifier *auth.Verifier
	metrics  *metrics
	sends    *sendTracker
	router   *router
	parts    *partInfos
	consEnv  *consumerEnv // what every device consumer shares (consumer.go)
	mirror   *cursorMirror
	bodies   *bodyCache
	events   *eventWriter
	limits   *limits
	admit    *admission // the login budget (admission.go)
	web      *webApp    // nil without Options.Web
	// loginWarns rate-limits the log lines of refused logins.
	loginWarns  *logLimiter
	revocations *revocationSweep
	epoch       uint64

	resultPrefix string
	resultSub    *nats.Subscription
	erasedSub    *nats.Subscription // streams.BodiesErased

	mu        sync.Mutex
	lns       []net.Listener
	conns     map[*Conn]struct{}
	closeOnce sync.Once
	pageGate  *pageGate
	steer     *liveSteer          // live first (livesteer.go)
	poller    *poller             // nil: every connection keeps its reader goroutine (Options.NoPark, not Linux)
	bnc       *nats.Conn          // backfill reads (Options.Backfill, or nc)
	bjs       jetstream.JetStream // on bnc
	wg        sync.WaitGroup
	stop      context.CancelFunc
}

// New returns a gateway; Start opens its listeners.
func New(opts Options, log *zap.Logger, nc *nats.Conn, st *store.Store, verifier *auth.Verifier, reg prometheus.Registerer) (*Gateway, error) {
	opts.setDefaults()
	sst := st
	if opts.SendStore != nil {
		sst = opts.SendStore
	}
	g := &Gateway{
		opts:         opts,
		log:          log,
		nc:           nc,
		st:           st,
		sst:          sst,
		verifier:     verifier,
		metrics:      newMetrics(reg),
		epoch:        uint64(time.Now().UnixNano()),
		resultPrefix: "_INBOXD.gw." + opts.ID + ".",
		conns:        make(map[*Conn]struct{}),
		loginWarns:   newLogLimiter(5),
	}
	g.limits = newLimits(&g.opts, st, sst, g.metrics)
	g.logins = store.NewLoginBatcher(st, loginFlights(st), loginBatchMax)
	f := promauto.With(reg)
	f.NewCounterFunc(prometheus.CounterOpts{
		Name: "inboxd_gateway_login_reads_total", Help: "Postgres reads of logins (each a batch of the logins waiting: inboxd_gateway_login_reads_logins_total / this is the mean batch).",
	}, func() float64 { n, _ := g.logins.Stats(); return float64(n) })
	f.NewCounterFunc(prometheus.CounterOpts{
		Name: "inboxd_gateway_login_reads_logins_total", Help: "Logins read by the batched login reads (inboxd_gateway_login_reads_total).",
	}, func() float64 { _, n := g.logins.Stats(); return float64(n) })
	g.admit = newAdmission(g.opts.LoginConcurrency, g.opts.LoginRate, admissionMetricsOf(g.metrics))
	g.web = newWebApp(g)
	g.sends = newSendTracker(g)
	g.router = newRouter(g)
	g.revocations = newRevocationSweep(g)
	g.pageGate = newPageGate(pageSlots)
	g.steer = newLiveSteer(max(g.opts.LiveDelayTarget, 0), g.steerLevel)
	g.steerLevel(1)
	g.parts = &partInfos{g: g, m: make([]partInfo, opts.Layout.InboxPartitions)}
	g.mirror = &cursorMirror{g: g}
	g.bodies = newBodyCache(opts.BodyCacheEntries, st.BodiesAndHorizons)
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(8192),
		jetstream.WithPublishAsyncTimeout(10*time.Second),
		jetstream.WithPublishAsyncAckHandler(g.sends.onPubAck),
		jetstream.WithPublishAsyncErrHandler(g.sends.onPubErr),
		jetstream.WithClientTrace(ops.JetStreamTrace(reg)),
	)
	if err != nil {
		return nil, err
	}
	g.js = js
	g.events = newEventWriter(js, nc, opts.Layout.InboxPartitions, &convKinds{lookup: sst.ConvKinds}, log, g.metrics)
	if !opts.NoPark {
		if g.poller, err = newPoller(log, opts.Heartbeat, func(n int) { g.metrics.parked.Set(float64(n)) }); err != nil {
			log.Warn("no epoll: idle connections keep a reader goroutine each", zap.Error(err))
			g.poller = nil
		}
	}
	g.bnc, g.bjs = nc, js
	if opts.Backfill != nil {
		if g.bjs, err = jetstream.New(opts.Backfill, jetstream.WithClientTrace(ops.JetStreamTrace(reg))); err != nil {
			return nil, err
		}
		g.bnc = opts.Backfill
	}
	g.consEnv = &consumerEnv{
		js: g.bjs, nc: g.bnc, cursors: g.st, epochs: g.st, parts: g.parts, recreated: g.metrics.consumersRecreated, requests: g.metrics.consumerRequests, log: g.log,
		opts: consumerOptions{idleReap: g.opts.DeviceIdleReap, newDeviceWindow: g.opts.NewDeviceWindow, newDeviceMax: g.opts.NewDeviceMax},
	}
	return g, nil
}

// Start subscribes to send results and opens the listeners.
func (g *Gateway) Start(ctx context.Context) error {
	ctx, g.stop = context.WithCancel(ctx)
	g.events.start(ctx)
	sub, err := g.nc.Subscribe(g.resultPrefix+"*", g.sends.onResult)
	if err != nil {
		return fmt.Errorf("gateway: subscribe results: %w", err)
	}
	_ = sub.SetPendingLimits(-1, -1)
	g.resultSub = sub
	if g.erasedSub, err = g.nc.Subscribe(streams.BodiesErased, func(m *nats.Msg) {
		g.bodies.drop(streams.ParseErasedIDs(m.Data))
	}); err != nil {
		return fmt.Errorf("gateway: subscribe erased bodies: %w", err)
	}
	if err := g.router.start(); err != nil {
		return err
	}
	g.parts.refresh(ctx)
	for _, run := range []func(){
		func() { g.sends.run(ctx) },
		func() { g.parts.run(ctx, 250*time.Millisecond) },
		func() { g.mirror.run(ctx, time.Second) },
		func() { g.watchReconnects(ctx) },
		func() { g.limits.run(ctx) },
		func() { g.revocations.run(ctx, g.opts.RevocationSweep) },
		func() { g.web.run(ctx) },
		func() { g.poller.run(ctx) },
		func() { g.steer.run(ctx) },
	} {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			run()
		}()
	}
	return g.listen()
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
	if g.erasedSub != nil {
		_ = g.erasedSub.Unsubscribe()
	}
	g.router.stop()
	g.wg.Wait()
	g.events.wait()
	g.closeOnce.Do(func() { close(g.router.done) })
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

// watchReconnects makes every session re-read its tail after the gateway's
// NATS connection came back: live announcements (core NATS, at most once)
// sent while it was away are lost, the inbox entries are not. Revocation
// announcements too: the revocations are swept at once.
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
				g.revocations.now()
				g.bodies.clear() // body erasures announced meanwhile were missed
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
