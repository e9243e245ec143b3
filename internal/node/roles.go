package node

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/archive"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/fanout"
	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/lifecycle"
	"github.com/inboxd/inboxd/internal/ops"
	"github.com/inboxd/inboxd/internal/push"
	"github.com/inboxd/inboxd/internal/retention"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// startSyncer starts the admin API, the archiver, the early cleanup, the
// retention job, the lifecycle jobs (user deletion, housekeeping) and,
// with --push, the pusher, whose loops run until run ends.
func (n *Node) startSyncer(run context.Context, cfg config.Config, roles config.Role, login natsLogin, js jetstream.JetStream, reg prometheus.Registerer) error {
	var err error
	// The syncer's JetStream calls are counted (inboxd_jetstream_api_*).
	if js, err = jetstream.New(n.NC, jetstream.WithClientTrace(ops.JetStreamTrace(reg))); err != nil {
		return err
	}
	if n.admin, err = admin.Start(n.NC, js, cfg.Layout, n.Pools.Background, n.log.Named("admin")); err != nil {
		return err
	}
	if err := cfg.ValidateSyncer(); err != nil {
		return err
	}
	n.Lifecycle = lifecycle.New(lifecycle.Options{Layout: cfg.Layout, DeviceForget: cfg.DeviceForget, DeviceReap: cfg.DeviceReap,
		RejectHorizon: cfg.RejectHorizon, Every: cfg.HousekeepingEvery, LegalHold: cfg.LegalHold}, n.log.Named("lifecycle"), n.NC, js, n.Pools.Background, reg)
	if err := n.admin.ServeLifecycle(n.Lifecycle); err != nil {
		return err
	}
	n.runLoop(run, "lifecycle", n.Lifecycle.Run)
	// The archiver reads every inbox entry: on its own connection, so
	// that in an all-in-one process its deliveries do not queue the
	// gateway's and the fanout's traffic.
	ajs := js
	if roles&(config.RoleGateway|config.RoleFanout) != 0 {
		if n.archNC, err = login.connect("inboxd-archiver", n.log); err != nil {
			return err
		}
		if ajs, err = jetstream.New(n.archNC, jetstream.WithClientTrace(ops.JetStreamTrace(reg))); err != nil {
			return err
		}
	}
	// The archiver's partitions are pinned consumers: it runs on every
	// syncer. Its trimmer joins the singleton jobs.
	arch := archive.New(archive.Options{Layout: cfg.Layout, HotWindow: cfg.HotWindow, SeparateTrimmer: true}, n.log.Named("archive"), ajs, n.Pools.Background, reg)
	n.runLoop(run, "archiver", arch.Run)
	if roles&(config.RoleGateway|config.RoleFanout) != 0 {
		// After a power cut the streams may be behind what Postgres
		// records: fenced before this process publishes into them.
		select {
		case <-arch.Checked():
		case <-run.Done():
		}
	}
	singletons := map[string]func(context.Context) error{"trimmer": arch.RunTrimmer}
	// Retention reads whole time ranges: on a pool of its own, so that
	// sends and syncs keep theirs.
	// (Node.Close closes it with the others.)
	if n.Pools.Retention, err = store.OpenPool(run, cfg.DatabaseURL, "retention", 2); err != nil {
		return err
	}
	ret := retention.New(retention.Options{Retention: cfg.Retention, Width: cfg.PartitionWidth, Hold: cfg.LegalHold},
		n.log.Named("retention"), n.Pools.Retention, reg)
	n.runLoop(run, "retention", ret.Run)
	if cfg.CleanupEvery > 0 {
		cl, err := archive.NewCleaner(archive.CleanupOptions{Layout: cfg.Layout, Every: cfg.CleanupEvery, Rate: cfg.CleanupRate,
			Batch: cfg.CleanupBatch, Margin: cfg.CleanupMargin, NewDeviceWindow: cfg.NewDeviceWindow, NewDeviceMax: cfg.NewDeviceMax},
			n.log.Named("cleanup"), n.NC, n.Pools.Background, reg)
		if err != nil {
			return err
		}
		singletons["early cleanup"] = cl.Run
	}
	n.singletonJobs(run, n.leases, holderName(cfg), singletons)
	if cfg.Push {
		if err := n.startPush(run, cfg, roles, login, js, reg); err != nil {
			return err
		}
	}
	return nil
}

// startPush creates the PUSH stream and the bridge's consumer and starts
// the pusher (internal/push). Like the archiver it reads every inbox
// entry: on a connection of its own in a process with other roles.
func (n *Node) startPush(run context.Context, cfg config.Config, roles config.Role, login natsLogin, js jetstream.JetStream, reg prometheus.Registerer) error {
	ctx, cancel := context.WithTimeout(run, 60*time.Second)
	defer cancel()
	if err := streams.EnsurePush(ctx, js, cfg.Replicas); err != nil {
		return err
	}
	pjs, closeConn := js, func() {}
	if roles&(config.RoleGateway|config.RoleFanout) != 0 {
		nc, err := login.connect("inboxd-push", n.log)
		if err != nil {
			return err
		}
		closeConn = nc.Close
		if pjs, err = jetstream.New(nc); err != nil {
			nc.Close()
			return err
		}
	}
	p, err := push.New(cfg.PushOptions(), n.log.Named("push"), pjs, n.Pools.Background.Pool, reg)
	if err != nil {
		closeConn()
		return err
	}
	n.runLoop(run, "push", func(ctx context.Context) error {
		defer closeConn()
		return p.Run(ctx)
	})
	return nil
}

// startFanout creates the fanout's consumers (within ctx) and starts its
// loop, which runs until run ends.
func (n *Node) startFanout(ctx, run context.Context, cfg config.Config, reg prometheus.Registerer) error {
	var err error
	n.Fanout, err = fanout.New(fanout.Options{Layout: cfg.Layout, NodeID: cfg.NodeID, BatchSize: cfg.BatchSize,
		Leases: n.leases, Holder: holderName(cfg)},
		n.log.Named("fanout"), n.NC, n.Pools.Send, reg)
	if err != nil {
		return err
	}
	// Before anything runs: an --node-id that a running fanout holds
	// refuses the start.
	if err := n.Fanout.TakeNodeID(ctx); err != nil {
		return err
	}
	// A node that just rejoined its cluster may find the meta layer busy
	// catching up: its first creates time out (seen in TestAllInOneCluster
	// after a restart). They are retried like the streams' creation.
	if err := retryCluster(ctx, n.log, "create the fanout consumers", cfg.Replicas, func(ctx context.Context) error {
		return n.Fanout.CreateConsumers(ctx)
	}); err != nil {
		return err
	}
	n.runLoop(run, "fanout", n.Fanout.Run)
	return nil
}

// startGateway starts the gateway's listeners with keys (loaded before
// anything started); its sessions run until run ends or Close shuts it down.
func (n *Node) startGateway(run context.Context, cfg config.Config, keys gatewayKeys, login natsLogin, reg prometheus.Registerer) error {
	tlsConf, err := tlsConfig(cfg)
	if err != nil {
		return err
	}
	// Backfill reads get a NATS connection of their own: in a login
	// storm their deliveries would otherwise queue live entries and
	// sends behind them on one TCP connection.
	if n.bulkNC, err = login.connect("inboxd-gateway-backfill", n.log); err != nil {
		return err
	}
	n.Gateway, err = gateway.New(gateway.Options{
		WSAddr: cfg.WSAddr, TCPAddr: cfg.TCPAddr, Layout: cfg.Layout, Heartbeat: cfg.Heartbeat, AckTimeout: cfg.AckTimeout,
		DeviceIdleReap: cfg.DeviceReap, TailScan: cfg.TailScan,
		NewDeviceWindow: cfg.NewDeviceWindow, NewDeviceMax: cfg.NewDeviceMax,
		OfflineThreshold: cfg.OfflineThreshold, PullRate: rate.Limit(cfg.PullRate),
		MaxConnsPerUser: cfg.MaxConnsPerUser, SendRate: rate.Limit(cfg.SendRate), TLS: tlsConf,
		DeviceSeenEvery: cfg.DeviceSeenEvery, Backfill: n.bulkNC,
		SendEntryRate: rate.Limit(cfg.SendEntryRate), MaxDevicesPerUser: cfg.MaxDevicesPerUser, RequestRate: rate.Limit(cfg.RequestRate),
		PreauthConns: cfg.PreauthConns, PreauthConnsPerIP: cfg.PreauthConnsPerIP,
		LoginConcurrency: cfg.LoginConcurrency, LiveDelayTarget: liveDelayTarget(cfg.LiveDelayTarget), LoginRate: loginRate(cfg.LoginRate),
		Web: webFiles(cfg), DevToken: devTokens(cfg), SendStore: n.Pools.Send,
	}, n.log.Named("gateway"), n.NC, n.Pools.Catchup, keys.verifier, reg)
	if err != nil {
		return err
	}
	return n.Gateway.Start(run)
}

// loginRate is --login-rate as a gateway option: 0 is no rate limit
// (rate.Inf; a zero option would take the default).
func loginRate(perSecond float64) rate.Limit {
	if perSecond <= 0 {
		return rate.Inf
	}
	return rate.Limit(perSecond)
}

// liveDelayTarget is the gateway's LiveDelayTarget of --live-delay-target
// (0: no steering).
func liveDelayTarget(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// runLoop runs a role's loop until ctx ends; Close waits for it. An end
// other than by Close is logged as "<what> stopped".
func (n *Node) runLoop(ctx context.Context, what string, loop func(context.Context) error) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if err := loop(ctx); err != nil && !errors.Is(err, context.Canceled) {
			n.log.Error(what+" stopped", zap.Error(err))
		}
	}()
}

// roleNames names roles for logs and NATS connection names ("nats+gateway").
func roleNames(r config.Role) string {
	var s string
	for _, x := range []struct {
		r config.Role
		n string
	}{{config.RoleEmbeddedNATS, "nats"}, {config.RoleGateway, "gateway"}, {config.RoleFanout, "fanout"}, {config.RoleSyncer, "syncer"}} {
		if r&x.r != 0 {
			if s != "" {
				s += "+"
			}
			s += x.n
		}
	}
	return s
}
