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

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := Start(ctx, cfg, roles, log)
	if err != nil {
		log.Error("start failed", zap.Error(err))
		os.Exit(1)
	}
	<-ctx.Done()
	log.Info("shutting down")
	done := make(chan struct{})
	go func() { n.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		log.Warn("shutdown took longer than 30s; exiting")
	}
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
