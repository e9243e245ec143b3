package node

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/store"
)

// connectPostgres opens the store, waiting for Postgres to be reachable,
// and migrates its schema.
func (n *Node) connectPostgres(ctx context.Context, url string) error {
	var err error
	if n.Store, err = openStore(ctx, url, n.log); err != nil {
		return err
	}
	v, err := n.Store.Migrate(ctx)
	if err != nil {
		return err
	}
	n.log.Info("postgres schema ready", zap.Int32("version", v))
	return nil
}

// openStore retries store.Open until it succeeds or ctx ends.
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
