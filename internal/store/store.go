// Package store is inboxd's Postgres storage: the connection pool, the
// migrations, and one file per table with the SQL that touches it.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"

	sqlfiles "github.com/inboxd/inboxd/sql"
)

// DefaultURL is the database `make run` prepares.
const DefaultURL = "postgres://inboxd:inboxd@127.0.0.1:5432/inboxd?sslmode=disable"

// Typed errors callers decide on.
var (
	ErrConvNotFound = errors.New("conversation not found")
	ErrInvalid      = errors.New("invalid argument")
)

// Store wraps the pool. All methods are safe for concurrent use.
type Store struct {
	Pool *pgxpool.Pool

	// afterHorizons, in tests, runs between ExpireRange's steps 1 and 2
	// (a hold set while a range is being expired).
	afterHorizons func()
}

// Open connects to url and checks the connection. maxConns 0 keeps pgx's
// default (max(4, GOMAXPROCS)).
func Open(ctx context.Context, url string, maxConns int32) (*Store, error) {
	return OpenPool(ctx, url, "", maxConns)
}

// OpenPool is Open for one of a process's pools: with a name, its
// connections carry application_name "inboxd-<name>" (or "<the URL's
// application_name>-<name>"), so that pg_stat_activity tells the pools
// apart.
func OpenPool(ctx context.Context, url, name string, maxConns int32) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store: parse database url: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	if name != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = ApplicationName(cfg.ConnConfig.RuntimeParams["application_name"], name)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("store: connect: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("store: ping %s: %w", cfg.ConnConfig.Host, err)
	}
	return &Store{Pool: pool}, nil
}

// ApplicationName is the application_name of pool name's connections when
// the database URL sets base (possibly empty).
func ApplicationName(base, name string) string {
	if base == "" {
		base = "inboxd"
	}
	return base + "-" + name
}

// Close closes the pool.
func (s *Store) Close() { s.Pool.Close() }

// Ping reports whether Postgres answers.
func (s *Store) Ping(ctx context.Context) error { return s.Pool.Ping(ctx) }

// Migrate applies the migrations in sql/ that have not run yet. Concurrent
// callers (several services starting at once) are serialised by tern's
// advisory lock; running it again is a no-op.
func (s *Store) Migrate(ctx context.Context) (int32, error) {
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: migrate: %w", err)
	}
	defer conn.Release()
	return migrateConn(ctx, conn.Conn())
}

func migrateConn(ctx context.Context, conn *pgx.Conn) (int32, error) {
	m, err := migrate.NewMigrator(ctx, conn, "inboxd_schema_version")
	if err != nil {
		return 0, fmt.Errorf("store: migrator: %w", err)
	}
	if err := m.LoadMigrations(sqlfiles.Migrations); err != nil {
		return 0, fmt.Errorf("store: load migrations: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return 0, fmt.Errorf("store: migrate: %w", err)
	}
	return m.GetCurrentVersion(ctx)
}
