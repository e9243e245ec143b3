package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
)

// Logins that wait while a batch is in flight leave together in the next
// one, and each gets its own device's state: its revocation, its mirrored
// cursor (or none) and its summary's first page (More past SummaryLimit),
// the same as the single-purpose reads (RevokedAt, GetDeviceCursor,
// Summary) give. The first batch is held in Postgres by a lock on
// device_cursor, so the second one's size does not depend on timing.
func TestLoginBatcherAnswersEachLoginOfABatch(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	// uid 100+u is in 10*u conversations (u = 1..20), unread by 1 or 2;
	// uid 120 in 200, so its first page is full: 201 for uid 121 gives More.
	_, err := st.Pool.Exec(ctx, `
		INSERT INTO conversation (conv_id, kind, last_seq)
		  SELECT u * 1000 + g, 2, 3 FROM generate_series(1, 21) u, generate_series(1, CASE WHEN u = 21 THEN 201 ELSE 10 * u END) g;
		INSERT INTO conv_member (conv_id, uid, read_seq) SELECT conv_id, 100 + conv_id / 1000, 1 + conv_id % 2 FROM conversation;
		INSERT INTO msg_content (msg_id, conv_id, conv_seq, sender_uid, sender_device, client_msg_id, kind, body, created_at)
		  SELECT conv_id * 10 + 3, conv_id, 3, 1, 'd', 'c' || conv_id, 1, 'last of ' || conv_id, '2026-01-01T00:00:00Z' FROM conversation;
		ANALYZE`)
	if err != nil {
		t.Fatal(err)
	}
	var keys []store.LoginKey
	for u := int64(101); u <= 121; u++ {
		keys = append(keys, store.LoginKey{UID: u, Device: fmt.Sprint("dev", u%3)})
	}
	keys = append(keys, store.LoginKey{UID: 105, Device: "other"}, store.LoginKey{UID: 999, Device: "nobody"})
	for i, k := range keys {
		if i%2 == 0 {
			if err := st.SaveDeviceCursors(ctx, []store.DeviceCursor{{UID: k.UID, Device: k.Device, Consumer: fmt.Sprint("d_", k.UID), AckSeq: uint64(k.UID * 7), Epoch: 2}}); err != nil {
				t.Fatal(err)
			}
		}
		if i%3 == 0 {
			if _, err := st.Revoke(ctx, k.UID, k.Device); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := st.Revoke(ctx, 110, ""); err != nil { // every device of 110
		t.Fatal(err)
	}

	lock := lockDeviceCursor(t, st)
	b := store.NewLoginBatcher(st, 1, 64)
	got := make([]store.LoginState, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	login := func(i int) {
		defer wg.Done()
		got[i], errs[i] = b.Login(ctx, keys[i].UID, keys[i].Device)
	}
	wg.Add(1)
	go login(0)
	waitUntil(t, "the first login's batch in flight", func() bool { return b.Waiting() == 0 && pgWaitsOnLock(t, st) })
	for i := 1; i < len(keys); i++ {
		wg.Add(1)
		go login(i)
	}
	waitUntil(t, "every other login waiting", func() bool { return b.Waiting() == len(keys)-1 })
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if batches, logins := b.Stats(); batches != 2 || logins != int64(len(keys)) {
		t.Fatalf("%d logins sent in %d batches carrying %d, want 2 batches", len(keys), batches, logins)
	}

	for i, k := range keys {
		if errs[i] != nil {
			t.Fatalf("login %d/%s: %v", k.UID, k.Device, errs[i])
		}
		at, err := st.RevokedAt(ctx, k.UID, k.Device)
		if err != nil {
			t.Fatal(err)
		}
		cur, found, err := st.GetDeviceCursor(ctx, k.UID, k.Device)
		if err != nil {
			t.Fatal(err)
		}
		convs, more, err := st.Summary(ctx, k.UID, 0, store.SummaryLimit)
		if err != nil {
			t.Fatal(err)
		}
		g := got[i]
		if !g.RevokedAt.Equal(at) || g.CursorFound != found || g.Cursor.UID != k.UID || g.Cursor.Device != k.Device || (found && g.Cursor != cur) {
			t.Fatalf("login %d/%s: revoked %v cursor %+v (found %v); want revoked %v cursor %+v (found %v)", k.UID, k.Device, g.RevokedAt, g.Cursor, g.CursorFound, at, cur, found)
		}
		if g.More != more || len(g.Convs) != len(convs) || (len(convs) > 0 && !reflect.DeepEqual(g.Convs, convs)) {
			t.Fatalf("login %d/%s: %d conversations (more %v), want the summary's %d (more %v)", k.UID, k.Device, len(g.Convs), g.More, len(convs), more)
		}
	}
	if g := got[len(keys)-3]; !g.More || len(g.Convs) != store.SummaryLimit { // uid 121
		t.Fatalf("uid 121: %d conversations, more %v; want a full page and more", len(g.Convs), g.More)
	}
	if g := got[9]; g.RevokedAt.IsZero() { // uid 110, revoked as a user
		t.Fatal("uid 110's user revocation is not read")
	}
}

// lockDeviceCursor holds device_cursor locked in a transaction until it
// is rolled back (or the test ends): a login batch read then waits in
// Postgres.
func lockDeviceCursor(t *testing.T, st *store.Store) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	lock, err := st.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Rollback(ctx) })
	if _, err := lock.Exec(ctx, `LOCK TABLE device_cursor IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return lock
}

// pgWaitsOnLock reports whether a backend waits for a lock.
func pgWaitsOnLock(t *testing.T, st *store.Store) bool {
	var n int
	if err := st.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// A batch that fails (its Postgres backend killed mid-read) fails its
// logins at once with the error, never with an empty state; a login whose
// caller gave up returns at once though its batch is still to come; and
// the batcher goes on: the logins waiting meanwhile leave in the next
// batch and get their state.
func TestLoginBatcherFailsABatchAndGoesOn(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	if err := st.SaveDeviceCursors(ctx, []store.DeviceCursor{{UID: 7, Device: "c", Consumer: "d_7_c", AckSeq: 70, Epoch: 1}}); err != nil {
		t.Fatal(err)
	}
	lock := lockDeviceCursor(t, st)
	b := store.NewLoginBatcher(st, 1, 64)
	type result struct {
		st  store.LoginState
		err error
	}
	a, bc, c := make(chan result, 1), make(chan result, 1), make(chan result, 1)
	go func() { s, err := b.Login(ctx, 5, "a"); a <- result{s, err} }()
	waitUntil(t, "the first login's batch in flight", func() bool { return b.Waiting() == 0 && pgWaitsOnLock(t, st) })
	gaveUp, cancel := context.WithCancel(ctx)
	go func() { s, err := b.Login(gaveUp, 6, "b"); bc <- result{s, err} }()
	go func() { s, err := b.Login(ctx, 7, "c"); c <- result{s, err} }()
	waitUntil(t, "two logins waiting", func() bool { return b.Waiting() == 2 })

	cancel()
	select {
	case r := <-bc:
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("a login whose caller gave up: %+v, %v; want context.Canceled", r.st, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a login whose caller gave up still waits for its batch")
	}

	var killed int
	if err := lock.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d backends (%v), want the batch's 1", killed, err)
	}
	select {
	case r := <-a:
		if r.err == nil {
			t.Fatalf("the login of the killed batch: %+v, no error", r.st)
		}
		t.Logf("the login of the killed batch: %v", r.err)
	case <-time.After(5 * time.Second):
		t.Fatal("the login of the killed batch is not answered")
	}
	waitUntil(t, "the next batch in flight", func() bool { return b.Waiting() == 0 && pgWaitsOnLock(t, st) })
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-c:
		want := store.DeviceCursor{UID: 7, Device: "c", Consumer: "d_7_c", AckSeq: 70, Epoch: 1}
		if r.err != nil || !r.st.CursorFound || r.st.Cursor != want {
			t.Fatalf("the login waiting behind the killed batch: %+v, %v; want its cursor %+v", r.st, r.err, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the login waiting behind the killed batch is not answered: the batcher stopped")
	}
	if batches, logins := b.Stats(); batches != 2 || logins != 3 {
		t.Fatalf("%d batches carrying %d logins, want 2 carrying 3", batches, logins)
	}
	if _, err := b.Login(ctx, 8, "d"); err != nil {
		t.Fatalf("a login after the failed batch: %v", err)
	}
}

// The login that starts a batch is a caller like the others: when it
// gives up, it returns at once, while its batch still waits in Postgres,
// and the batch's end is not its business (the flight lands on its own).
func TestLoginBatcherSenderCanGiveUp(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	lock := lockDeviceCursor(t, st)
	b := store.NewLoginBatcher(st, 1, 64)
	gaveUp, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := b.Login(gaveUp, 5, "a"); done <- err }()
	waitUntil(t, "the login's batch in flight", func() bool { return b.Waiting() == 0 && pgWaitsOnLock(t, st) })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the sender that gave up: %v, want context.Canceled", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the login that sent the batch waits for it though its caller gave up")
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the abandoned batch answered", func() bool { n, _ := b.Stats(); return n == 1 })
	if _, err := b.Login(ctx, 6, "b"); err != nil {
		t.Fatalf("a login after the abandoned one: %v", err)
	}
}
