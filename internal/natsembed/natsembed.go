// Package natsembed runs nats-server with JetStream inside an inboxd process:
// the all-in-one dev/edge mode and the tests. Its client port is a real
// listener, so the stock nats CLI works against it.
package natsembed

import (
	"fmt"
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
