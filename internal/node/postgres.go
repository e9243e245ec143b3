package node

import (
	"context"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/store"
)

// Pools are a node's Postgres pools, one per role class, each with
// connections of its own, so that one class's queue never holds another's
// queries (docs/design.md, "Postgres pools"). A class none of the node's
// roles has is nil.
type Pools struct {
	// Send is the live path: the gateway's send queries (member counts,
	// the STORED poll, the kinds of published events) and every fanout write.
	Send *store.Store
	// Catchup is the gateway's other work: logins, summaries, pages,
	// bodies, pulls, read marks, the cursor mirror, revocations.
	Catchup *store.Store
	// Background is the syncer's: the archiver, trimmer, early cleanup,
	// lifecycle and housekeeping, push, the admin service.
	Background *store.Store
	// Retention is the syncer's retention job's own (range reads, DDL).
	Retention *store.Store
}

// byName lists the pools under their names (the metrics' pool label and
// the application_name suffix); absent ones are nil.
func (p *Pools) byName() map[string]*store.Store {
	return map[string]*store.Store{"send": p.Send, "catchup": p.Catchup, "background": p.Background, "retention": p.Retention}
}

// close closes every pool opened.
func (p *Pools) close() {
	for _, st := range p.byName() {
		if st != nil {
			st.Close()
		}
	}
}

// connectPostgres opens the pools the node's roles use, waiting for
// Postgres to be reachable, and migrates the schema (once, on the first
// pool). n.Store is that first pool.
func (n *Node) connectPostgres(ctx context.Context, cfg config.Config, roles config.Role) error {
	for _, p := range []struct {
		on   bool
		name string
		size int
		dst  **store.Store
	}{
		{roles&(config.RoleGateway|config.RoleFanout) != 0, "send", cfg.PGSendConns, &n.Pools.Send},
		{roles&config.RoleGateway != 0, "catchup", cfg.PGCatchupConns, &n.Pools.Catchup},
		{roles&config.RoleSyncer != 0, "background", cfg.PGBackgroundConns, &n.Pools.Background},
	} {
		if !p.on {
			continue
		}
		st, err := openStore(ctx, cfg.DatabaseURL, p.name, int32(p.size), n.log)
		if err != nil {
			return err
		}
		*p.dst = st
		if n.Store == nil {
			n.Store = st
		}
	}
	v, err := n.Store.Migrate(ctx)
	if err != nil {
		return err
	}
	n.log.Info("postgres schema ready", zap.Int32("version", v))
	return nil
}

// openStore retries store.OpenPool until it succeeds or ctx ends.
func openStore(ctx context.Context, url, name string, size int32, log *zap.Logger) (*store.Store, error) {
	delay := 250 * time.Millisecond
	for {
		st, err := store.OpenPool(ctx, url, name, size)
		if err == nil {
			return st, nil
		}
		log.Warn("postgres not reachable yet; retrying", zap.String("pool", name), zap.Error(err), zap.Duration("in", delay))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("postgres: %w (gave up: %v)", err, ctx.Err())
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}
