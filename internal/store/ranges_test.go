package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
	sqlfiles "github.com/inboxd/inboxd/sql"
)

// fixture writes conversations, messages and inbox entries as the fanout
// and the archiver would.
type fixture struct {
	t   *testing.T
	st  *store.Store
	seq int64 // the last inbox seq used
}

// conv creates a direct conversation of uids 1 and other.
func (f *fixture) conv(other int64) int64 {
	f.t.Helper()
	c, _, err := f.st.CreateConversation(context.Background(), store.KindDirect, []int64{1, other}, false)
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// send stores messages from..to of conv sent at `at` (1 ms apart), with an
// archived inbox entry for each member, and returns their msg_ids.
func (f *fixture) send(conv int64, from, to int64, at time.Time) []int64 {
	f.t.Helper()
	ctx := context.Background()
	var out []int64
	for s := from; s <= to; s++ {
		id := ids.AtTime(at.Add(time.Duration(s-from) * time.Millisecond))
		out = append(out, id)
		_, err := f.st.Pool.Exec(ctx, `
			INSERT INTO msg_content (msg_id, conv_id, conv_seq, sender_uid, sender_device, client_msg_id, kind, body, created_at)
			VALUES ($1, $2, $3, 1, 'd', $4, 1, $5, $6)`, id, conv, s, fmt.Sprintf("c%d-%d", conv, s), fmt.Sprintf("m%d", s), at)
		if err != nil {
			f.t.Fatal(err)
		}
		var entries []store.ArchivedEntry
		for _, uid := range f.members(conv) {
			f.seq++
			entries = append(entries, store.ArchivedEntry{UID: uid, Seq: uint64(f.seq), MsgID: id, ConvID: conv, ConvSeq: s, Kind: 1})
		}
		if err := f.st.ArchiveEntries(ctx, 0, entries, uint64(f.seq)); err != nil {
			f.t.Fatal(err)
		}
	}
	if _, err := f.st.Pool.Exec(ctx, `UPDATE conversation SET last_seq = GREATEST(last_seq, $2) WHERE conv_id = $1`, conv, to); err != nil {
		f.t.Fatal(err)
	}
	return out
}

func (f *fixture) members(conv int64) []int64 {
	c, err := f.st.GetConversation(context.Background(), conv)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []int64
	for _, m := range c.Members {
		out = append(out, m.UID)
	}
	return out
}

func (f *fixture) count(q string, args ...any) int {
	f.t.Helper()
	var n int
	if err := f.st.Pool.QueryRow(context.Background(), q, args...).Scan(&n); err != nil {
		f.t.Fatalf("%s: %v", q, err)
	}
	return n
}

func (f *fixture) rangeOf(key int64) store.Range {
	f.t.Helper()
	rs, err := f.st.Ranges(context.Background())
	if err != nil {
		f.t.Fatal(err)
	}
	for _, r := range rs {
		if r.Lo <= key && key < r.Hi {
			return r
		}
	}
	f.t.Fatalf("no range holds key %d", key)
	return store.Range{}
}

func (f *fixture) horizon(conv int64) int64 {
	f.t.Helper()
	h, err := f.st.Horizons(context.Background(), []int64{conv})
	if err != nil {
		f.t.Fatal(err)
	}
	return h[conv]
}

// hourly opens a migrated database whose legacy range ended three hours
// ago (as if migration 007 ran then) and whose ranges are an hour wide from
// there to two hours ahead.
func hourly(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, testenv.Database(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	cut := ids.AtTime(time.Now().Add(-3 * time.Hour).Truncate(time.Hour))
	for _, q := range []string{
		`DROP TABLE msg_content_legacy`,
		`DROP TABLE inbox_archive_legacy`,
		fmt.Sprintf(`CREATE TABLE msg_content_legacy PARTITION OF msg_content FOR VALUES FROM (MINVALUE) TO (%d)`, cut),
		fmt.Sprintf(`CREATE TABLE inbox_archive_legacy PARTITION OF inbox_archive FOR VALUES FROM (MINVALUE) TO (%d)`, cut),
		`COMMENT ON TABLE msg_content_legacy IS 'inboxd range'`,
		`COMMENT ON TABLE inbox_archive_legacy IS 'inboxd range'`,
		fmt.Sprintf(`UPDATE data_range SET hi = %d WHERE name = 'legacy'`, cut),
	} {
		if _, err := st.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if _, err := st.EnsureRanges(ctx, ids.AtTime(time.Now().Add(2*time.Hour)), store.RangeGrid(time.Hour)); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, st: st}
}

// An existing installation keeps its data through migration 007: the old
// tables become the legacy range, every read finds their rows, and the
// send key stays unique there. Rows written before the syncer's first
// ranges wait in the default partition, which the first EnsureRanges moves
// into the first range and drops. Retention then removes the legacy range
// as a whole once it is past the horizon, recording each conversation's
// horizon first.
func TestMigrationKeepsExistingDataInTheLegacyRange(t *testing.T) {
	ctx := context.Background()
	url := testenv.Database(t)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	m, err := migrate.NewMigrator(ctx, conn, "inboxd_schema_version")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(sqlfiles.Migrations); err != nil {
		t.Fatal(err)
	}
	if err := m.MigrateTo(ctx, 6); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-40 * 24 * time.Hour)
	base := ids.AtTime(old)
	_, err = conn.Exec(ctx, fmt.Sprintf(`
		INSERT INTO conversation (conv_id, kind, direct_key, last_seq) VALUES (1, 1, '1:2', 30);
		INSERT INTO conv_member (conv_id, uid) VALUES (1, 1), (1, 2);
		INSERT INTO msg_content (msg_id, conv_id, conv_seq, sender_uid, sender_device, client_msg_id, kind, body, created_at)
		  SELECT %[1]d + s, 1, s, 1, 'd', 'old-' || s, 1, 'old ' || s, now() - interval '40 days' FROM generate_series(1, 30) s;
		INSERT INTO inbox_archive (uid, seq, msg_id, conv_id, conv_seq, kind)
		  SELECT u, s * 10 + u, %[1]d + s, 1, s, 1 FROM generate_series(1, 30) s, generate_series(1, 2) u;
		INSERT INTO inbox_archive (uid, seq, msg_id, conv_id, conv_seq, kind, event, peer_uid) VALUES (2, 1000, 0, 1, 30, 0, 1, 0);
		INSERT INTO archive_progress (partition, archived_seq) VALUES (0, 1000)`, base))
	if err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	st, err := store.Open(ctx, url, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Migrate(ctx); err != nil {
		t.Fatalf("migration 007 on existing data: %v", err)
	}
	f := &fixture{t: t, st: st, seq: 2000}
	if n := f.count(`SELECT count(*) FROM msg_content_legacy`); n != 30 {
		t.Fatalf("%d messages in the legacy range, want 30", n)
	}
	if n := f.count(`SELECT count(*) FROM inbox_archive_legacy`); n != 61 {
		t.Fatalf("%d inbox entries in the legacy range, want 61", n)
	}
	page, exp, err := st.ArchivePage(ctx, nil, nil, 2, 0, 1000, 100)
	page = testenv.WithBodies(t, st, page)
	if err != nil || len(page) != 31 || page[0].Text != "old 1" || page[30].EventType != 1 || len(exp) != 0 {
		t.Fatalf("archive page of the legacy data: %d entries (%v), expired %v", len(page), err, exp)
	}
	pr, err := st.Pull(ctx, 2, 1, 0, 0, 50)
	if err != nil || len(pr.Messages) != 30 || pr.ExpiredUpTo != 0 {
		t.Fatalf("pull of the legacy data: %+v, %v", pr, err)
	}
	if _, err := st.Pool.Exec(ctx, `INSERT INTO msg_content (msg_id, conv_id, conv_seq, sender_uid, sender_device, client_msg_id, kind, body, created_at)
		VALUES ($1, 1, 99, 1, 'd', 'old-1', 1, 'again', now())`, base+99); !store.IsUniqueViolation(err) {
		t.Fatalf("a second row with a legacy send key: %v, want a unique violation", err)
	}

	// Before the syncer's first ranges: the default partition.
	now := f.send(1, 31, 31, time.Now())
	if n := f.count(`SELECT count(*) FROM msg_content_default`); n != 1 {
		t.Fatalf("%d rows in the default partition, want the new one", n)
	}
	created, err := st.EnsureRanges(ctx, ids.AtTime(time.Now().Add(3*time.Hour)), store.RangeGrid(time.Hour))
	if err != nil || len(created) < 3 {
		t.Fatalf("first ranges: %v, %v", created, err)
	}
	if n := f.count(`SELECT count(*) FROM pg_class WHERE relname IN ('msg_content_default', 'inbox_archive_default')`); n != 0 {
		t.Fatal("the default partitions are still there")
	}
	if r := f.rangeOf(now[0]); r.Name != created[0].Name || f.count(`SELECT count(*) FROM `+pgx.Identifier{"msg_content_" + r.Name}.Sanitize()) != 1 {
		t.Fatalf("the new row is not in the first range %s", created[0].Name)
	}
	if n := f.count(`SELECT count(*) FROM inbox_archive WHERE msg_id = $1`, now[0]); n != 2 {
		t.Fatalf("%d entries of the new message, want 2", n)
	}

	// The legacy range past the horizon.
	legacy := f.rangeOf(base)
	if legacy.Name != store.LegacyRange {
		t.Fatalf("the old rows are in %s", legacy.Name)
	}
	res, err := st.ExpireRange(ctx, legacy, 10, nil)
	if err != nil || !res.Dropped || res.Removed["msg_content"] != 30 || res.Removed["inbox_archive"] != 61 || res.Bytes <= 0 {
		t.Fatalf("expire the legacy range: %+v, %v", res, err)
	}
	if f.horizon(1) != 30 || f.count(`SELECT count(*) FROM msg_content`) != 1 ||
		f.count(`SELECT count(*) FROM pg_class WHERE relname LIKE '%_legacy'`) != 0 {
		t.Fatalf("after the legacy range: horizon %d, %d messages", f.horizon(1), f.count(`SELECT count(*) FROM msg_content`))
	}
	sum, _, err := st.Summary(ctx, 2, 0, 10)
	if err != nil || len(sum) != 1 || sum[0].ExpiredUpTo != 30 || sum[0].LastPreview != "m31" {
		t.Fatalf("summary: %+v, %v", sum, err)
	}
}

// The ranges are cut on the grid and reach the target; asking again
// creates nothing; two syncers at once create each range once.
func TestEnsureRangesOnTheGrid(t *testing.T) {
	f := hourly(t)
	ctx := context.Background()
	check := func(until time.Time) {
		t.Helper()
		rs, err := f.st.Ranges(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(rs); i++ {
			if rs[i].Lo != rs[i-1].Hi {
				t.Fatalf("ranges %s and %s are not contiguous", rs[i-1].Name, rs[i].Name)
			}
			if lo := ids.Time(rs[i].Lo); lo.Truncate(time.Hour) != lo || rs[i].Name != store.RangeName(rs[i].Lo) {
				t.Fatalf("range %s starts off the hourly grid", rs[i].Name)
			}
		}
		if end := ids.Time(rs[len(rs)-1].Hi); end.Before(until) {
			t.Fatalf("ranges end at %s, want at least %s", end, until)
		}
	}
	check(time.Now().Add(2 * time.Hour))
	if again, err := f.st.EnsureRanges(ctx, ids.AtTime(time.Now().Add(2*time.Hour)), store.RangeGrid(time.Hour)); err != nil || len(again) != 0 {
		t.Fatalf("again: %v, %v", again, err)
	}
	until := time.Now().Add(12 * time.Hour)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = f.st.EnsureRanges(ctx, ids.AtTime(until), store.RangeGrid(time.Hour))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The syncers that found the lock taken did nothing; the next run of
	// any of them completes what is due.
	if _, err := f.st.EnsureRanges(ctx, ids.AtTime(until), store.RangeGrid(time.Hour)); err != nil {
		t.Fatal(err)
	}
	check(until)
}

// Expiring a range keeps the rows of held conversations, in a rebuilt
// range: theirs stay (bodies and entries), the others' go, and their
// horizons move. A conversation held while the range was being expired
// (after its horizon was read) is kept too, and its horizon put back
// below what was kept. While every kept conversation is still held the
// range is left alone; lifting a hold removes its rows at the next run.
func TestExpireRangeKeepsHeldConversations(t *testing.T) {
	f := hourly(t)
	ctx := context.Background()
	heldConv, plain, lateHeld := f.conv(2), f.conv(3), f.conv(4)
	at := time.Now().Add(-90 * time.Minute).Truncate(time.Hour).Add(time.Minute)
	f.send(heldConv, 1, 10, at)
	f.send(plain, 1, 10, at.Add(time.Second))
	late := f.send(lateHeld, 1, 10, at.Add(2*time.Second))
	if _, err := f.st.SetHold(ctx, heldConv, true); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.SetHold(ctx, 999, true); !errors.Is(err, store.ErrConvNotFound) {
		t.Fatalf("hold of a missing conversation: %v", err)
	}
	store.SetAfterHorizons(f.st, func() {
		if _, err := f.st.SetHold(ctx, lateHeld, true); err != nil {
			t.Error(err)
		}
	})
	r := f.rangeOf(late[0])
	res, err := f.st.ExpireRange(ctx, r, 1, nil)
	store.SetAfterHorizons(f.st, nil)
	if err != nil || !res.Rebuilt || res.Removed["msg_content"] != 10 || res.Removed["inbox_archive"] != 20 || res.Kept != 60 {
		t.Fatalf("expire with holds: %+v, %v", res, err)
	}
	for conv, want := range map[int64]int{heldConv: 10, plain: 0, lateHeld: 10} {
		if got := f.count(`SELECT count(*) FROM msg_content WHERE conv_id = $1`, conv); got != want {
			t.Errorf("conversation %d: %d bodies, want %d", conv, got, want)
		}
		if got := f.count(`SELECT count(*) FROM inbox_archive WHERE conv_id = $1`, conv); got != 2*want {
			t.Errorf("conversation %d: %d entries, want %d", conv, got, 2*want)
		}
	}
	if h := [3]int64{f.horizon(heldConv), f.horizon(plain), f.horizon(lateHeld)}; h != [3]int64{0, 10, 0} {
		t.Fatalf("horizons held/plain/held late %v, want [0 10 0]", h)
	}
	if r = f.rangeOf(late[0]); r.Gen != 1 || !slices.Equal(r.Kept, []int64{heldConv, lateHeld}) {
		t.Fatalf("rebuilt range %+v", r)
	}
	page, _, err := f.st.ArchivePage(ctx, nil, nil, 4, 0, 1<<40, 100)
	page = testenv.WithBodies(t, f.st, page)
	if err != nil || len(page) != 10 || page[0].Expired || page[0].Text != "m1" {
		t.Fatalf("a held conversation's page: %v, %v", page, err)
	}

	if res, err := f.st.ExpireRange(ctx, r, 1, nil); err != nil || !res.Unchanged {
		t.Fatalf("expire again while all kept are held: %+v, %v", res, err)
	}
	if _, err := f.st.SetHold(ctx, lateHeld, false); err != nil {
		t.Fatal(err)
	}
	res, err = f.st.ExpireRange(ctx, r, 1, nil)
	if err != nil || !res.Rebuilt || res.Removed["msg_content"] != 10 || f.horizon(lateHeld) != 10 {
		t.Fatalf("after lifting a hold: %+v, %v, horizon %d", res, err, f.horizon(lateHeld))
	}
	if _, err := f.st.SetHold(ctx, heldConv, false); err != nil {
		t.Fatal(err)
	}
	res, err = f.st.ExpireRange(ctx, f.rangeOf(late[0]), 1, nil)
	if err != nil || !res.Dropped || f.count(`SELECT count(*) FROM msg_content WHERE conv_id = $1`, heldConv) != 0 {
		t.Fatalf("after lifting the last hold: %+v, %v", res, err)
	}
	if n := f.count(`SELECT count(*) FROM pg_class WHERE relname LIKE $1`, "%"+r.Name+"%"); n != 0 {
		t.Fatalf("%d tables of the range are left", n)
	}
}

// Reconcile finishes what a run interrupted: a detach left pending (the
// process died inside DETACH CONCURRENTLY), a range of which one partition
// was detached, a rebuilt copy that was never swapped in.
func TestReconcileFinishesInterruptedRuns(t *testing.T) {
	f := hourly(t)
	ctx := context.Background()
	conv := f.conv(2)
	at := time.Now().Add(-150 * time.Minute).Truncate(time.Hour)
	a := f.send(conv, 1, 5, at.Add(time.Minute))
	b := f.send(conv, 6, 10, at.Add(61*time.Minute))
	ra, rb := f.rangeOf(a[0]), f.rangeOf(b[0])
	if ra.Name == rb.Name {
		t.Fatal("the fixture wants two ranges")
	}

	// ra: its inbox entries' partition detached, then the process died.
	if _, err := f.st.Pool.Exec(ctx, `ALTER TABLE inbox_archive DETACH PARTITION `+pgx.Identifier{"inbox_archive_" + ra.Name}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	// rb: DETACH CONCURRENTLY interrupted while it waited for a reader.
	reader, err := f.st.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Exec(ctx, `SELECT count(*) FROM msg_content`); err != nil {
		t.Fatal(err)
	}
	// Its first transaction commits the pending state; then it waits for
	// the reader, and is cancelled there.
	dctx, cancel := context.WithCancel(ctx)
	detached := make(chan error, 1)
	go func() {
		_, err := f.st.Pool.Exec(dctx, `ALTER TABLE msg_content DETACH PARTITION `+pgx.Identifier{"msg_content_" + rb.Name}.Sanitize()+` CONCURRENTLY`)
		detached <- err
	}()
	for deadline := time.Now().Add(30 * time.Second); f.count(`SELECT count(*) FROM pg_inherits WHERE inhdetachpending`) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the detach never became pending")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-detached; err == nil {
		t.Fatal("the detach did not wait for the reader")
	}
	// The client gave up at once; the server stops at the cancel request:
	// the reader stays until it did, or the detach would complete.
	for deadline := time.Now().Add(30 * time.Second); f.count(`SELECT count(*) FROM pg_stat_activity
		WHERE state = 'active' AND query LIKE 'ALTER TABLE msg_content DETACH%'`) > 0; {
		if time.Now().After(deadline) {
			t.Fatal("the detach was not cancelled")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = reader.Rollback(ctx)
	if n := f.count(`SELECT count(*) FROM pg_inherits WHERE inhdetachpending`); n != 1 {
		t.Fatalf("%d detaches pending, want 1", n)
	}
	// A rebuilt copy that was never swapped in.
	if _, err := f.st.Pool.Exec(ctx, `CREATE TABLE msg_content_r20200101t000000000_h1 (LIKE msg_content);
		COMMENT ON TABLE msg_content_r20200101t000000000_h1 IS 'inboxd range'`); err != nil {
		t.Fatal(err)
	}

	if ok, err := f.st.Reconcile(ctx); err != nil || !ok {
		t.Fatalf("reconcile: %v, %v", ok, err)
	}
	if n := f.count(`SELECT count(*) FROM pg_inherits WHERE inhdetachpending`); n != 0 {
		t.Fatalf("%d detaches still pending", n)
	}
	for _, r := range []store.Range{ra, rb} {
		if n := f.count(`SELECT count(*) FROM data_range WHERE name = $1`, r.Name); n != 0 {
			t.Fatalf("range %s half dropped is still listed", r.Name)
		}
		if n := f.count(`SELECT count(*) FROM pg_class WHERE relname LIKE $1`, "%"+r.Name+"%"); n != 0 {
			t.Fatalf("%d tables of range %s are left", n, r.Name)
		}
	}
	if n := f.count(`SELECT count(*) FROM pg_class WHERE relname = 'msg_content_r20200101t000000000_h1'`); n != 0 {
		t.Fatal("the loose copy is left")
	}
	if n := f.count(`SELECT count(*) FROM msg_content WHERE conv_id = $1`, conv); n != 0 {
		t.Fatalf("%d messages of the two ranges are left", n)
	}
}

// The grid: months cut at the first of each month (UTC), fixed widths from
// ids.Epoch; next(k) is always above k, also for a key on a boundary.
func TestRangeGrid(t *testing.T) {
	month := store.RangeGrid(0)
	jan := ids.AtTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	feb := ids.AtTime(time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	for _, k := range []int64{jan, jan + 1, feb - 1} {
		if got := month(k); got != feb {
			t.Errorf("month(%s) = %s, want Feb 1", ids.Time(k), ids.Time(got))
		}
	}
	if got := month(ids.AtTime(time.Date(2026, 12, 15, 0, 0, 0, 0, time.UTC))); ids.Time(got) != time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) {
		t.Errorf("December's next is %s", ids.Time(got))
	}
	sec := store.RangeGrid(time.Second)
	for _, k := range []int64{jan, jan + 5, jan + ids.AtTime(ids.Epoch.Add(999*time.Millisecond))} {
		if got := sec(k); got <= k || ids.Time(got).Sub(ids.Time(jan)) != time.Second {
			t.Errorf("second(%d) = %s", k, ids.Time(got))
		}
	}
}
