// Package node wires inboxd's roles (embedded NATS, gateway, fanout, syncer)
// into one process from a config. Every binary in cmd/ is a node with some
// of the roles; cmd/inboxd has all of them.
package node

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/fanout"
	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/lifecycle"
	"github.com/inboxd/inboxd/internal/ops"
	"github.com/inboxd/inboxd/internal/store"
)

// Node is a running set of roles.
type Node struct {
	log *zap.Logger

	NATS   *server.Server // set with RoleEmbeddedNATS
	NC     *nats.Conn
	bulkNC *nats.Conn // the gateway's backfill reads (its own TCP connection)
	archNC *nats.Conn // the archiver's reads, in a process with other roles
	// Store is the first of Pools the node opened (send, catch-up,
	// background): the schema was migrated on it, /readyz pings it.
	Store   *store.Store
	Pools   Pools
	Gateway *gateway.Gateway
	Fanout  *fanout.Fanout
	// Lifecycle runs user deletions and housekeeping (with RoleSyncer).
	Lifecycle *lifecycle.Lifecycle
	Ops       *ops.Server
	Debug     *ops.Debug // with --debug-http

	admin  *admin.Service
	leases jetstream.KeyValue // the leases bucket (fanout, syncer)
	cancel context.CancelFunc // ends the roles' loops
	wg     sync.WaitGroup     // the roles' loops
}

// Start brings the roles up and returns once they serve: /readyz turns
// ready only then, after every role's listeners accept and the admin
// service answers. Postgres and NATS that are not up yet are waited for
// (logged), until ctx ends. What Start has brought up when it fails is
// closed again.
func Start(ctx context.Context, cfg config.Config, roles config.Role, log *zap.Logger) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Before anything listens: an unauthenticated debug listener open to
	// the network is refused, not bound and closed again.
	if err := checkDebugAddr(cfg.DebugHTTPAddr); err != nil {
		return nil, err
	}
	// Nor a development secret beside a reachable address.
	if err := checkExposure(cfg, roles, log); err != nil {
		return nil, err
	}
	var keys gatewayKeys
	if roles&config.RoleGateway != 0 {
		if keys, err = loadGatewayKeys(cfg, log); err != nil {
			return nil, err
		}
	}
	n := &Node{log: log}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	// Ops HTTP first: /livez answers, /readyz says what is not ready yet
	// while the rest waits.
	reg, err := n.startOps(cfg)
	if err != nil {
		return nil, err
	}

	login := serviceLogin(cfg, roles)
	if roles&config.RoleEmbeddedNATS != 0 {
		if login, err = n.startNATS(cfg, roles); err != nil {
			return nil, err
		}
	}
	if roles&^config.RoleEmbeddedNATS == 0 {
		n.Ops.AddCheck(natsServerReady(n.NATS))
		n.Ops.SetStarted()
		return n, nil // NATS only (inboxd --nats-only)
	}

	if err := n.connectPostgres(ctx, cfg, roles); err != nil {
		return nil, err
	}
	js, err := n.connectNATS(ctx, login, roles, cfg.Layout, cfg.HotWindow, cfg.Replicas)
	if err != nil {
		return nil, err
	}
	n.addReadyChecks(js)
	if err := n.openLeases(ctx, cfg, roles, js); err != nil {
		return nil, err
	}

	// The roles' loops run until Close, not until ctx (which bounds the start).
	run, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if roles&config.RoleSyncer != 0 {
		if err := n.startSyncer(run, cfg, roles, login, js, reg); err != nil {
			return nil, err
		}
	}
	if roles&config.RoleFanout != 0 {
		if err := n.startFanout(ctx, run, cfg, reg); err != nil {
			return nil, err
		}
	}
	if roles&config.RoleGateway != 0 {
		if err := n.startGateway(run, cfg, keys, login, reg); err != nil {
			return nil, err
		}
		if n.Debug != nil {
			n.Debug.Handle("/debug/sessions", sessionsPage(n.Gateway))
		}
	}
	n.registerConnMetrics(reg)
	// Every role is up and its listeners accept (Gateway.Start returns
	// after them): load balancers may route here now.
	n.Ops.SetStarted()
	log.Info("inboxd node ready", zap.String("roles", roleNames(roles)), zap.String("http", n.Ops.Addr()))
	return n, nil
}

// Close stops the roles in reverse order of dependency: unready first
// (/readyz 503, if Run's drain has not done it already), no new client work
// (gateway, admin API), then the loops, then the connections they used,
// Postgres, the embedded NATS server, and the ops and debug HTTP last.
func (n *Node) Close() {
	if n.Ops != nil {
		n.Ops.SetDraining()
	}
	if n.Gateway != nil {
		n.Gateway.Shutdown()
	}
	if n.admin != nil {
		_ = n.admin.Stop()
	}
	if n.cancel != nil {
		n.cancel()
	}
	n.wg.Wait()
	if n.bulkNC != nil {
		n.bulkNC.Close()
	}
	if n.archNC != nil {
		n.archNC.Close()
	}
	if n.NC != nil {
		_ = n.NC.Drain()
		for i := 0; i < 50 && !n.NC.IsClosed(); i++ {
			time.Sleep(20 * time.Millisecond)
		}
		n.NC.Close()
	}
	n.Pools.close()
	if n.NATS != nil {
		n.NATS.Shutdown()
		n.NATS.WaitForShutdown()
	}
	if n.Debug != nil {
		_ = n.Debug.Close()
	}
	if n.Ops != nil {
		_ = n.Ops.Close()
	}
}
