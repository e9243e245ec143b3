// Command pushbridge is inboxd's reference push bridge: it reads the push
// events the syncer publishes (--push) from the PUSH stream's durable
// consumer pushbridge and POSTs each to the relay's webhook (the
// customer's APNs/FCM relay), acking after a 2xx and retrying with
// backoff otherwise (docs/operations.md, "Push bridge").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/natsconn"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/ops"
	"github.com/inboxd/inboxd/internal/push/bridge"
)

func main() {
	cfg := config.DefaultsFor(config.RolePushBridge)
	fs := flag.NewFlagSet("pushbridge", flag.ContinueOnError)
	cfg.Register(fs, config.RolePushBridge)
	if err := config.Parse(fs, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "pushbridge: %v\n", err)
		fs.Usage()
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "pushbridge: unexpected argument %q (flags only)\n", fs.Arg(0))
		os.Exit(2)
	}
	if err := cfg.BridgeOptions().Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "pushbridge: %v\n", err)
		os.Exit(2)
	}
	log, err := node.NewLogger(cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer func() { _ = log.Sync() }()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	if err := run(cfg, log, signals); err != nil {
		log.Error("start failed", zap.Error(err))
		os.Exit(1)
	}
}

// run serves until the first signal: /readyz turns 503, the bridge goes on
// for the drain delay, then stops taking events and lets the requests in
// flight end (an event cut short is handed out again at once).
func run(cfg config.Config, log *zap.Logger, signals <-chan os.Signal) error {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := ops.Listen(cfg.HTTPAddr, reg)
	if err != nil {
		return err
	}
	defer func() { _ = srv.Close() }()
	nc, err := natsconn.Connect(cfg.NATSURL, "inboxd-pushbridge", log, natsOptions(cfg, log)...)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	b, err := bridge.New(cfg.BridgeOptions(), log.Named("pushbridge"), js, reg)
	if err != nil {
		return err
	}
	srv.AddCheck(ops.Check{Name: "nats", Fn: func(context.Context) error {
		if !nc.IsConnected() {
			return errors.New("disconnected")
		}
		return nil
	}})
	srv.AddCheck(ops.Check{Name: "consumer", Fn: b.Ready})
	srv.SetStarted()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	log.Info("push bridge started", zap.String("http", srv.Addr()))
	select {
	case <-signals:
	case err := <-done:
		return err
	}
	srv.SetDraining()
	if cfg.DrainDelay > 0 {
		select {
		case <-time.After(cfg.DrainDelay):
		case <-signals:
		}
	}
	log.Info("shutting down")
	cancel()
	<-done
	return nil
}

// natsOptions are the bridge's login: its reply prefix (the only one its
// user may subscribe to), a credentials file or user and password (by
// default pushbridge and $INBOXD_NATS_PASSWORD_PUSHBRIDGE), and TLS.
func natsOptions(cfg config.Config, log *zap.Logger) []nats.Option {
	opts := []nats.Option{nats.CustomInboxPrefix(natsauth.InboxPrefix(natsauth.PushBridge))}
	switch {
	case cfg.NATSCreds != "":
		opts = append(opts, nats.UserCredentials(cfg.NATSCreds))
	default:
		user, pw := cfg.NATSUser, cfg.NATSPassword
		if user == "" {
			user = string(natsauth.PushBridge)
		}
		if pw == "" {
			pw = natsauth.Password(natsauth.Role(user))
		}
		if pw == natsauth.DevPassword(natsauth.Role(user)) {
			log.Warn("the NATS password is the development password; set INBOXD_NATS_PASSWORD_PUSHBRIDGE in production", zap.String("user", user))
		}
		opts = append(opts, nats.UserInfo(user, pw))
	}
	if cfg.NATSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.NATSCA))
	}
	if cfg.NATSCert != "" {
		opts = append(opts, nats.ClientCert(cfg.NATSCert, cfg.NATSKey))
	}
	return opts
}
