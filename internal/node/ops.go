package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/ops"
	"github.com/inboxd/inboxd/internal/streams"
)

// startOps serves the ops HTTP (/livez, /readyz, /healthz, /metrics) on
// cfg.HTTPAddr and, with --debug-http, the debug HTTP (/debug/pprof), and
// returns the registry the roles' metrics go to. /readyz answers 503 until
// Start has brought every role up.
func (n *Node) startOps(cfg config.Config) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), ops.BuildInfo())
	var err error
	if n.Ops, err = ops.Listen(cfg.HTTPAddr, reg); err != nil {
		return nil, err
	}
	if cfg.DebugHTTPAddr != "" {
		if n.Debug, err = ops.ListenDebug(cfg.DebugHTTPAddr); err != nil {
			return nil, fmt.Errorf("--debug-http: %w", err)
		}
	}
	return reg, nil
}

// checkDebugAddr refuses a --debug-http other hosts could reach; Start
// calls it before it listens on anything.
func checkDebugAddr(addr string) error {
	if addr == "" {
		return nil
	}
	if err := ops.CheckDebugAddr(addr); err != nil {
		return fmt.Errorf("config: --debug-http %s: %w", addr, err)
	}
	return nil
}

// natsServerReady is the readiness of a process that is only the embedded
// NATS server.
func natsServerReady(s *server.Server) ops.Check {
	return ops.Check{Name: "nats", Fn: func(context.Context) error {
		if !s.ReadyForConnections(time.Second) {
			return errors.New("not ready")
		}
		return nil
	}}
}

// addReadyChecks makes /readyz report the main NATS connection, Postgres
// and the streams.
func (n *Node) addReadyChecks(js jetstream.JetStream) {
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
}

// sessionsPage serves /debug/sessions?uid=N on the debug listener: the
// gateway's sessions of a user (every user's without uid) as JSON.
func sessionsPage(gw *gateway.Gateway) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid, _ := strconv.ParseInt(r.URL.Query().Get("uid"), 10, 64)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(gw.Sessions(uid))
	})
}
