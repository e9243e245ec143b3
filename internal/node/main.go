package node

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/inboxd/inboxd/internal/config"
)

// Main is the whole main() of an inboxd binary: parse flags, start the
// roles, wait for SIGINT/SIGTERM, shut down. adjust may change defaults
// before flags are registered.
func Main(name string, roles config.Role, adjust func(*config.Config)) {
	cfg := config.DefaultsFor(roles)
	if adjust != nil {
		adjust(&cfg)
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	cfg.Register(fs, roles)
	if err := config.Parse(fs, os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.Usage()
			os.Exit(0)
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		fs.Usage()
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "%s: unexpected argument %q (flags only)\n", name, fs.Arg(0))
		os.Exit(2)
	}

	log, err := NewLogger(cfg.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer func() { _ = log.Sync() }()

	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	if err := Run(cfg, roles, log, signals); err != nil {
		log.Error("start failed", zap.Error(err))
		os.Exit(1)
	}
}

// closeTimeout bounds Close after the drain delay: a shutdown stuck on a
// dependency must not keep the process from exiting.
const closeTimeout = 30 * time.Second

// Run is Main after the flags: it starts the roles and serves until the
// first signal on signals (SIGTERM or SIGINT; a signal during the start
// abandons it), then shuts down gracefully. /readyz turns 503 at once, the
// node goes on serving its connections for cfg.DrainDelay so that load
// balancers see the 503 and route new connections elsewhere (a second
// signal cuts the delay short), and then Close closes the connections and
// the rest. It returns Start's error, or nil after the shutdown.
func Run(cfg config.Config, roles config.Role, log *zap.Logger, signals <-chan os.Signal) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopping := make(chan struct{})
	go func() {
		select {
		case <-signals:
			close(stopping)
			cancel()
		case <-ctx.Done(): // Start failed
		}
	}()
	n, err := Start(ctx, cfg, roles, log)
	if err != nil {
		return err
	}
	<-stopping
	n.Ops.SetDraining()
	if cfg.DrainDelay > 0 {
		log.Info("shutting down: unready; closing connections after the drain delay (signal again to skip it)",
			zap.Duration("drain_delay", cfg.DrainDelay))
		t := time.NewTimer(cfg.DrainDelay)
		select {
		case <-t.C:
		case <-signals:
			t.Stop()
			log.Info("second signal: drain delay cut short")
		}
	}
	log.Info("shutting down")
	done := make(chan struct{})
	go func() { n.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(closeTimeout):
		log.Warn("shutdown took too long; exiting", zap.Duration("timeout", closeTimeout))
	}
	return nil
}

// NewLogger returns a JSON logger at level.
func NewLogger(level string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	c := zap.NewProductionConfig()
	c.Level = zap.NewAtomicLevelAt(lvl)
	c.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	c.Sampling = nil
	return c.Build()
}
