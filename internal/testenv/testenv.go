// Package testenv holds the shared fixtures of inboxd's tests: a real
// embedded nats-server in a temp dir, a fresh Postgres database per test,
// whole nodes on free ports, and client tokens. Nothing is mocked.
package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/natsembed"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/wire"
)

// AdminURL is the Postgres URL tests create their databases through
// (env INBOXD_TEST_DATABASE_URL; `make test` prepares the default).
func AdminURL() string {
	if u := os.Getenv("INBOXD_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://inboxd:inboxd@127.0.0.1:5432/postgres?sslmode=disable"
}

// Secret is the token secret of test nodes (auth.MinSecretLen bytes or
// more, as every HS256 secret).
const Secret = "inboxd-test-secret-0123456789abcdef"

// Database creates an empty database for one test and drops it afterwards.
// It returns the database's URL.
func Database(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, AdminURL())
	if err != nil {
		t.Fatalf("testenv: connect to Postgres at %s (run `make test`, which prepares it): %v", AdminURL(), err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "inboxd_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("testenv: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, AdminURL())
		if err != nil {
			t.Logf("testenv: drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("testenv: drop %s: %v", name, err)
		}
	})
	cfg, err := pgx.ParseConfig(AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", cfg.User, cfg.Password,
		net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), name)
}

// Store opens a fresh, migrated database, with the monthly time ranges of
// msg_content and inbox_archive created as a syncer would (the current
// month and the next two).
func Store(t testing.TB) *store.Store {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, Database(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.EnsureRanges(ctx, ids.AtTime(time.Now().AddDate(0, 2, 0)), store.RangeGrid(0)); err != nil {
		t.Fatal(err)
	}
	return st
}

// NATS is a restartable embedded nats-server with JetStream.
type NATS struct {
	t    testing.TB
	Dir  string
	Port int
	S    *server.Server
}

// StartNATS starts a JetStream server on a free port with its store in a
// temp dir; it is shut down when the test ends.
func StartNATS(t testing.TB) *NATS {
	t.Helper()
	n := &NATS{t: t, Dir: t.TempDir(), Port: FreePort(t)}
	n.Start()
	t.Cleanup(n.Stop)
	return n
}

// URL is the server's client URL.
func (n *NATS) URL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.Port) }

// Start (re)starts the server on the same port and store.
func (n *NATS) Start() {
	n.t.Helper()
	s, err := natsembed.Start(natsembed.Options{Port: n.Port, StoreDir: n.Dir})
	if err != nil {
		n.t.Fatal(err)
	}
	n.S = s
}

// Stop shuts the server down (clients see a disconnect).
func (n *NATS) Stop() {
	if n.S != nil {
		n.S.Shutdown()
		n.S.WaitForShutdown()
		n.S = nil
	}
}

// FreePort returns a TCP port that was free a moment ago.
//
// It is StablePort: a port the kernel hands out with :0 lies in the
// ephemeral range, where by the time a process binds it, it may be the
// source port of any outgoing connection on the box.
func FreePort(t testing.TB) int {
	t.Helper()
	return StablePort(t)
}

// Logger returns a logger that writes to the test log at warn level and above.
func Logger(t testing.TB) *zap.Logger {
	return zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))
}

// Verifier returns a verifier of the tokens Token issues (Secret, no kid,
// the default lifetime bound).
func Verifier(t testing.TB) *auth.Verifier {
	t.Helper()
	v, err := auth.NewHS256Verifier(Secret)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Token returns a client token for uid and device valid for an hour.
func Token(t testing.TB, uid int64, device string) string {
	t.Helper()
	tok, err := auth.NewSigner(Secret).Issue(uid, device, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// WithBodies completes the messages of an archive page (store.ArchivePage,
// NewestPage) with their bodies read from Postgres, as a gateway does
// through its body cache (store.NeedsBody, SetBody).
func WithBodies(t testing.TB, st *store.Store, page []wire.Message) []wire.Message {
	t.Helper()
	var need []int64
	for i := range page {
		if store.NeedsBody(&page[i]) {
			need = append(need, page[i].MsgID)
		}
	}
	bodies, _, err := st.BodiesAndHorizons(context.Background(), need, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range page {
		if store.NeedsBody(&page[i]) {
			b, found := bodies[page[i].MsgID]
			store.SetBody(&page[i], b, found)
		}
	}
	return page
}
