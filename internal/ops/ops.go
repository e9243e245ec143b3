// Package ops serves a service's operational HTTP endpoints. The ops
// listener (--http) has /metrics (Prometheus) and the health endpoints:
// /livez (the process serves HTTP), /readyz (every role is up, every
// readiness check passes, the process is not shutting down) and /healthz
// (an alias of /readyz for existing tooling). The debug listener
// (--debug-http, see debug.go) has the profiles and the session pages,
// which carry no authentication and so stay off the ops port.
package ops

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// DefaultDrainDelay is how long a process that got SIGTERM or SIGINT stays
// up unready before it closes its connections: long enough for a load
// balancer or a Kubernetes endpoints update to see /readyz fail and stop
// routing new connections here, short enough that a rolling restart stays
// quick. Set --drain-delay to the prober's interval times its failure
// threshold in production.
const DefaultDrainDelay = 5 * time.Second

// Check reports whether one dependency is ready.
type Check struct {
	Name string
	Fn   func(ctx context.Context) error
}

// Readiness reasons that are no check's: the body of a 503 names them.
const (
	notStarted   = "starting: not every role is up yet"
	shuttingDown = "shutting down"
)

// Server is the ops HTTP server. It is unready from Listen until
// SetStarted, and again for good from SetDraining.
type Server struct {
	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	checks   []Check
	started  bool
	draining bool
}

// Listen opens addr and serves /livez, /readyz, /healthz and /metrics from
// reg. /readyz answers 503 until SetStarted.
func Listen(addr string, reg *prometheus.Registry) (*Server, error) {
	mux := http.NewServeMux()
	s := &Server{}
	mux.HandleFunc("/livez", s.livez)
	mux.HandleFunc("/readyz", s.readyz)
	mux.HandleFunc("/healthz", s.readyz)
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	var err error
	if s.srv, s.ln, err = serve("ops", addr, mux); err != nil {
		return nil, err
	}
	return s, nil
}

// Addr returns the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// AddCheck adds a readiness check.
func (s *Server) AddCheck(c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks = append(s.checks, c)
}

// SetStarted says every role is up and its listeners accept: from now on
// /readyz is as ready as its checks (until SetDraining).
func (s *Server) SetStarted() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = true
}

// SetDraining says the process is shutting down: /readyz answers 503 from
// now on, whatever the checks say, so that load balancers route new
// connections elsewhere while the existing ones are still served.
func (s *Server) SetDraining() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
}

// livez answers 200 while the process serves HTTP at all: a liveness probe
// restarts a process that stops answering, not one that waits for Postgres.
func (s *Server) livez(w http.ResponseWriter, _ *http.Request) {
	fmt.Fprintln(w, "ok")
}

// readyz answers 200 "ok", or 503 with what is not ready, one per line.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	checks := append([]Check(nil), s.checks...)
	started, draining := s.started, s.draining
	s.mu.Unlock()
	var failed []string
	switch {
	case draining:
		// The checks are not asked: their dependencies are going away.
		failed = append(failed, shuttingDown)
	default:
		if !started {
			failed = append(failed, notStarted)
		}
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		for _, c := range checks {
			if err := c.Fn(ctx); err != nil {
				failed = append(failed, c.Name+": "+err.Error())
			}
		}
	}
	if len(failed) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, strings.Join(failed, "\n"))
		return
	}
	fmt.Fprintln(w, "ok")
}

// Close stops the server.
func (s *Server) Close() error { return shutdown(s.srv) }

// serve listens on addr and serves h until shutdown.
func serve(what, addr string, h http.Handler) (*http.Server, net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("%s http: listen %s: %w", what, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, ln, nil
}

// shutdown stops srv, waiting a little for requests in flight.
func shutdown(srv *http.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
