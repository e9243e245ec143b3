package ops

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
)

// ErrNotLoopback refuses a debug address other hosts could reach.
var ErrNotLoopback = errors.New("not a loopback address: the debug endpoints have no authentication; use 127.0.0.1:PORT, [::1]:PORT or localhost:PORT")

// CheckDebugAddr accepts only addresses of the loopback interface: an IP
// literal such as 127.0.0.1 or ::1, or localhost. An empty host (every
// interface), 0.0.0.0, any other address and other host names (which could
// resolve anywhere) are refused with ErrNotLoopback.
func CheckDebugAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return ErrNotLoopback
}

// Debug is the debug HTTP server: /debug/pprof/* (Go profiles, for
// operators and the benchmark tool) and the pages added with Handle, such as
// /debug/sessions. It lists who is connected and lets anyone take profiles,
// so it listens on loopback only.
type Debug struct {
	mux *http.ServeMux
	srv *http.Server
	ln  net.Listener
}

// ListenDebug opens addr, which CheckDebugAddr must accept, and serves the
// profiles.
func ListenDebug(addr string) (*Debug, error) {
	if err := CheckDebugAddr(addr); err != nil {
		return nil, fmt.Errorf("debug http %s: %w", addr, err)
	}
	d := &Debug{mux: http.NewServeMux()}
	// No /debug/pprof/cmdline: the command line may hold a secret
	// (--token-secret, a --database-url with its password).
	d.mux.HandleFunc("/debug/pprof/", pprof.Index)
	d.mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	d.mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	d.mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	var err error
	if d.srv, d.ln, err = serve("debug", addr, d.mux); err != nil {
		return nil, err
	}
	return d, nil
}

// Handle adds a debug page (e.g. /debug/sessions).
func (d *Debug) Handle(pattern string, h http.Handler) { d.mux.Handle(pattern, h) }

// Addr returns the bound address.
func (d *Debug) Addr() string { return d.ln.Addr().String() }

// Close stops the server.
func (d *Debug) Close() error { return shutdown(d.srv) }
