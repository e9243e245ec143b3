// Package natsembed runs nats-server with JetStream inside an inboxd process:
// the all-in-one dev/edge mode and the tests. Its client port is a real
// listener, so the stock nats CLI works against it.
package natsembed

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options configures the embedded server.
type Options struct {
	Host     string // default 127.0.0.1
	Port     int    // default 4222; -1 picks a free port
	StoreDir string // JetStream file store; required
	Name     string // server name; default "inboxd"
	// Logging turns on the server's own log (to stderr).
	Logging bool
	// Users, when set, are the only accepted clients (internal/natsauth).
	Users []*server.User

	// Cluster: when ClusterListen is set the server listens for routes
	// there and joins the servers at Routes (their cluster URLs,
	// nats://host:port) as one NATS cluster named ClusterName (default
	// "inboxd"), with JetStream clustered over it. Every server of a
	// cluster needs its own Name.
	ClusterName   string
	ClusterListen string // host:port
	Routes        []string
	// ClusterUser and ClusterPassword, when set, are required of every
	// route that connects, and sent on the routes to Routes (unless a
	// route URL carries its own user info).
	ClusterUser, ClusterPassword string
	// ClusterTLS, when set, is the routes' TLS (both directions: it holds
	// this server's certificate and the CAs that verify its peers').
	ClusterTLS *tls.Config
}

// Start starts the server and waits until it accepts connections.
func Start(o Options) (*server.Server, error) {
	if o.StoreDir == "" {
		return nil, fmt.Errorf("natsembed: StoreDir is required")
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.Port == 0 {
		o.Port = 4222
	}
	if o.Name == "" {
		o.Name = "inboxd"
	}
	opts := &server.Options{
		ServerName: o.Name,
		Host:       o.Host,
		Port:       o.Port,
		JetStream:  true,
		StoreDir:   o.StoreDir,
		// Inbox entries are small; many per user; do not let a single client
		// stall the server with a huge payload.
		MaxPayload: 1 << 20,
		NoSigs:     true,
		Users:      o.Users,
	}
	if o.ClusterListen != "" {
		if o.ClusterName == "" {
			o.ClusterName = "inboxd"
		}
		host, port, err := net.SplitHostPort(o.ClusterListen)
		if err != nil {
			return nil, fmt.Errorf("natsembed: cluster listen %q: %w", o.ClusterListen, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return nil, fmt.Errorf("natsembed: cluster listen %q: port: %w", o.ClusterListen, err)
		}
		opts.Cluster = server.ClusterOpts{Name: o.ClusterName, Host: host, Port: p,
			Username: o.ClusterUser, Password: o.ClusterPassword}
		if o.ClusterTLS != nil {
			opts.Cluster.TLSConfig, opts.Cluster.TLSTimeout = o.ClusterTLS, 2
		}
		for _, r := range o.Routes {
			u, err := url.Parse(r)
			if err != nil || u.Host == "" {
				return nil, fmt.Errorf("natsembed: route %q is not a nats://host:port URL", r)
			}
			if u.User == nil && o.ClusterUser != "" {
				u.User = url.UserPassword(o.ClusterUser, o.ClusterPassword)
			}
			opts.Routes = append(opts.Routes, u)
		}
	} else if len(o.Routes) > 0 {
		return nil, fmt.Errorf("natsembed: routes %v need a cluster listen address", o.Routes)
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsembed: %w", err)
	}
	if o.Logging {
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		return nil, fmt.Errorf("natsembed: server on %s:%d not ready after 30s", o.Host, o.Port)
	}
	return s, nil
}
