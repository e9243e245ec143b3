// Package node wires inboxd's roles (embedded NATS, gateway, fanout, syncer)
// into one process from a config. Every binary in cmd/ is a node with some
// of the roles; cmd/inboxd has all of them.
package node

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/archive"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/fanout"
	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/natsconn"
	"github.com/inboxd/inboxd/internal/natsembed"
	"github.com/inboxd/inboxd/internal/ops"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// Node is a running set of roles.
type Node struct {
	cfg   config.Config
	roles config.Role
	log   *zap.Logger

	NATS    *server.Server // set with RoleEmbeddedNATS
	NC      *nats.Conn
	bulkNC  *nats.Conn // the gateway's backfill reads (its own TCP connection)
	archNC  *nats.Conn // the archiver's reads, in a process with other roles
	Store   *store.Store
	Gateway *gateway.Gateway
	Fanout  *fanout.Fanout
	Ops     *ops.Server

	admin  *admin.Service
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start brings the roles up and returns once they serve. Postgres and NATS
// that are not up yet are waited for (logged), until ctx ends.
func Start(ctx context.Context, cfg config.Config, roles config.Role, log *zap.Logger) (_ *Node, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, roles: roles, log: log}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if n.Ops, err = ops.Listen(cfg.HTTPAddr, reg); err != nil {
		return nil, err
	}

	natsURL := cfg.NATSURL
	if roles&config.RoleEmbeddedNATS != 0 {
		host, port, err := splitHostPort(cfg.NATSListen)
		if err != nil {
			return nil, err
		}
		// Least-privilege users: the all-in-one process's own user (a fresh
		// password each start), or one per service for a split deployment
		// on one box (--nats-only); always an admin for operators.
		pw := map[natsauth.Role]string{natsauth.Admin: natsauth.Password(natsauth.Admin)}
		if roles&^config.RoleEmbeddedNATS == 0 {
			for _, r := range []natsauth.Role{natsauth.Gateway, natsauth.Fanout, natsauth.Syncer} {
				pw[r] = natsauth.Password(r)
			}
		} else {
			cfg.NATSUser, cfg.NATSPassword = string(natsauth.AllInOne), natsauth.Random()
			pw[natsauth.AllInOne] = cfg.NATSPassword
		}
		if pw[natsauth.Admin] == natsauth.DevPassword(natsauth.Admin) {
			log.Warn("embedded NATS: the admin user has the development password; set INBOXD_NATS_PASSWORD_ADMIN in production")
		}
		n.NATS, err = natsembed.Start(natsembed.Options{Host: host, Port: port, StoreDir: filepath.Join(cfg.DataDir, "jetstream"),
			Users: natsauth.Users(pw, cfg.Layout.InboxPartitions)})
		if err != nil {
			return nil, err
		}
		natsURL = n.NATS.ClientURL()
		log.Info("embedded NATS JetStream", zap.String("url", natsURL), zap.String("store", filepath.Join(cfg.DataDir, "jetstream")))
	}
	if roles&^config.RoleEmbeddedNATS == 0 {
		n.Ops.AddCheck(ops.Check{Name: "nats", Fn: func(context.Context) error {
			if !n.NATS.ReadyForConnections(time.Second) {
				return errors.New("not ready")
			}
			return nil
		}})
		return n, nil // NATS only
	}

	if n.Store, err = openStore(ctx, cfg.DatabaseURL, log); err != nil {
		return nil, err
	}
	v, err := n.Store.Migrate(ctx)
	if err != nil {
		return nil, err
	}
	log.Info("postgres schema ready", zap.Int32("version", v))

	user, password := cfg.NATSUser, cfg.NATSPassword
	if user == "" {
		user = string(serviceRole(roles))
	}
	if password == "" {
		password = natsauth.Password(natsauth.Role(user))
	}
	if n.NC, err = natsconn.Connect(natsURL, "inboxd-"+roleNames(roles), log, nats.UserInfo(user, password)); err != nil {
		return nil, err
	}
	js, err := jetstream.New(n.NC)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	err = streams.EnsureStreams(sctx, js, cfg.Layout)
	cancel()
	if err != nil {
		return nil, err
	}
	n.Ops.AddCheck(ops.Check{Name: "nats", Fn: func(context.Context) error {
		if !n.NC.IsConnected() {
			return errors.New("disconnected")
		}
		return nil
	}})
	n.Ops.AddCheck(ops.Check{Name: "postgres", Fn: n.Store.Ping})
	n.Ops.AddCheck(ops.Check{Name: "streams", Fn: func(ctx context.Context) error {
		_, err := js.Stream(ctx, streams.SendStream)
		return err
	}})

	rctx, cancelRun := context.WithCancel(context.Background())
	n.cancel = cancelRun
	if roles&config.RoleSyncer != 0 {
		if n.admin, err = admin.Start(n.NC, js, cfg.Layout, n.Store, log.Named("admin")); err != nil {
			return nil, err
		}
		// The archiver reads every inbox entry: on its own connection, so
		// that in an all-in-one process its deliveries do not queue the
		// gateway's and the fanout's traffic.
		ajs := js
		if roles&(config.RoleGateway|config.RoleFanout) != 0 {
			if n.archNC, err = natsconn.Connect(natsURL, "inboxd-archiver", log, nats.UserInfo(user, password)); err != nil {
				return nil, err
			}
			if ajs, err = jetstream.New(n.archNC); err != nil {
				return nil, err
			}
		}
		arch := archive.New(archive.Options{Layout: cfg.Layout}, log.Named("archive"), ajs, n.Store, reg)
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := arch.Run(rctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("archiver stopped", zap.Error(err))
			}
		}()
	}
	if roles&config.RoleFanout != 0 {
		n.Fanout, err = fanout.New(fanout.Options{Layout: cfg.Layout, NodeID: cfg.NodeID, BatchSize: cfg.BatchSize},
			log.Named("fanout"), n.NC, n.Store, reg)
		if err != nil {
			return nil, err
		}
		if err := streams.EnsureFanoutConsumers(ctx, js, cfg.Layout); err != nil {
			return nil, err
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			if err := n.Fanout.Run(rctx); err != nil && !errors.Is(err, context.Canceled) {
				log.Error("fanout stopped", zap.Error(err))
			}
		}()
	}
	if roles&config.RoleGateway != 0 {
		if cfg.TokenSecret == auth.DevSecret {
			log.Warn("gateway uses the development token secret; set --token-secret or INBOXD_TOKEN_SECRET in production")
		}
		var edKey ed25519.PublicKey
		if cfg.TokenEdKeyFile != "" {
			b, err := os.ReadFile(cfg.TokenEdKeyFile)
			if err != nil {
				return nil, err
			}
			if edKey, err = auth.ParseEd25519PublicKey(b); err != nil {
				return nil, err
			}
		}
		if cfg.TokenSecret == "" && edKey == nil {
			return nil, errors.New("gateway: no way to verify tokens: set --token-secret or --token-ed25519-key")
		}
		var tlsConf *tls.Config
		if cfg.TLSCert != "" {
			cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
			if err != nil {
				return nil, fmt.Errorf("gateway: tls: %w", err)
			}
			tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
		// Backfill reads get a NATS connection of their own: in a login
		// storm their deliveries would otherwise queue live entries and
		// sends behind them on one TCP connection.
		if n.bulkNC, err = natsconn.Connect(natsURL, "inboxd-gateway-backfill", log, nats.UserInfo(user, password)); err != nil {
			return nil, err
		}
		n.Gateway, err = gateway.New(gateway.Options{
			WSAddr: cfg.WSAddr, TCPAddr: cfg.TCPAddr, Layout: cfg.Layout, Heartbeat: cfg.Heartbeat,
			DeviceIdleReap: cfg.DeviceReap, TailScan: cfg.TailScan,
			NewDeviceWindow: cfg.NewDeviceWindow, NewDeviceMax: cfg.NewDeviceMax,
			OfflineThreshold: cfg.OfflineThreshold, PullRate: rate.Limit(cfg.PullRate),
			MaxConnsPerUser: cfg.MaxConnsPerUser, SendRate: rate.Limit(cfg.SendRate), TLS: tlsConf,
			DeviceSeenEvery: cfg.DeviceSeenEvery, Backfill: n.bulkNC,
		}, log.Named("gateway"), n.NC, n.Store, auth.NewVerifierKeys(cfg.TokenSecret, edKey), reg)
		if err != nil {
			return nil, err
		}
		if err := n.Gateway.Start(rctx); err != nil {
			return nil, err
		}
		gw := n.Gateway
		n.Ops.Handle("/debug/sessions", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			uid, _ := strconv.ParseInt(r.URL.Query().Get("uid"), 10, 64)
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(gw.Sessions(uid))
		}))
	}
	log.Info("inboxd node ready", zap.String("roles", roleNames(roles)), zap.String("http", n.Ops.Addr()))
	return n, nil
}

// Close stops the roles in reverse order of dependency.
func (n *Node) Close() {
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
	if n.Store != nil {
		n.Store.Close()
	}
	if n.NATS != nil {
		n.NATS.Shutdown()
		n.NATS.WaitForShutdown()
	}
	if n.Ops != nil {
		_ = n.Ops.Close()
	}
}

func openStore(ctx context.Context, url string, log *zap.Logger) (*store.Store, error) {
	delay := 250 * time.Millisecond
	for {
		st, err := store.Open(ctx, url, 0)
		if err == nil {
			return st, nil
		}
		log.Warn("postgres not reachable yet; retrying", zap.Error(err), zap.Duration("in", delay))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("postgres: %w (gave up: %v)", err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// serviceRole is the NATS user a process with these roles connects as.
func serviceRole(r config.Role) natsauth.Role {
	switch r &^ config.RoleEmbeddedNATS {
	case config.RoleGateway:
		return natsauth.Gateway
	case config.RoleFanout:
		return natsauth.Fanout
	case config.RoleSyncer:
		return natsauth.Syncer
	}
	return natsauth.AllInOne
}

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
