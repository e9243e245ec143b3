package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/inboxd/inboxd/internal/ids"
)

// Time ranges (sql/007_retention.sql): msg_content is partitioned by
// msg_id, inbox_archive by tkey (the entry's msg_id, or an event's time as
// a msg_id), into ranges listed in data_range. The syncer creates them
// ahead of time (EnsureRanges) and retention removes whole ranges
// (ExpireRange) by detaching and dropping their partitions: no DELETE
// over their rows, no lock that stops sends.
//
// Every statement that changes partitions runs with a lock_timeout: DDL
// waiting for a lock queues every later query of the table behind it, so
// it gives up instead (and is tried again at the next run).

// Range is one time range: the rows with Lo <= key < Hi.
type Range struct {
	Name string `json:"name"`
	Lo   int64  `json:"lo"`
	Hi   int64  `json:"hi"`
	// Gen counts the rebuilds that kept a held conversation's rows
	// (partition names end in _h<gen>); Kept are the conversations whose
	// rows the last rebuild kept.
	Gen  int     `json:"gen,omitempty"`
	Kept []int64 `json:"kept,omitempty"`
}

// LegacyRange names the range of the data from before migration 007 (every
// key below the migration's time).
const LegacyRange = "legacy"

// rangeComment marks the tables that are ranges' partitions: leftovers of
// an interrupted run are found by it and dropped.
const rangeComment = "inboxd range"

// rangeBases are the partitioned tables, in the order their partitions are
// detached: inbox entries before the bodies they point at.
var rangeBases = []string{"inbox_archive", "msg_content"}

// ddlLockTimeout bounds how long partition DDL waits for its locks.
const ddlLockTimeout = "5s"

// Advisory lock keys: one syncer at a time changes ranges; a legal hold
// and the drop of a range exclude each other.
const (
	lockRanges int64 = 0x696e626f7801 // "inbox" 01
	lockHold   int64 = 0x696e626f7802
)

// tableName is the partition of base for range r at generation gen.
func tableName(base string, r Range, gen int) string {
	n := base + "_" + r.Name
	if gen > 0 {
		n += "_h" + strconv.Itoa(gen)
	}
	return n
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// RangeName is the name of a range starting at key lo: its start in UTC,
// to the millisecond ("r20260115t103000000").
func RangeName(lo int64) string {
	return "r" + strings.ReplaceAll(ids.Time(lo).UTC().Format("20060102t150405.000"), ".", "")
}

// Ranges returns the ranges, oldest first.
func (s *Store) Ranges(ctx context.Context) ([]Range, error) {
	rows, err := s.Pool.Query(ctx, `SELECT name, lo, hi, gen, coalesce(kept, '{}') FROM data_range ORDER BY lo`)
	if err != nil {
		return nil, fmt.Errorf("store: ranges: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Range, error) {
		var x Range
		err := r.Scan(&x.Name, &x.Lo, &x.Hi, &x.Gen, &x.Kept)
		return x, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: ranges: %w", err)
	}
	return out, nil
}

// withLock runs f on a connection of its own holding the session advisory
// lock key; ok is false (and f does not run) when another session holds it.
func (s *Store) withLock(ctx context.Context, key int64, f func(*pgxpool.Conn) error) (ok bool, err error) {
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil || !ok {
		return false, err
	}
	defer func() {
		// A connection whose unlock failed must not go back to the pool
		// holding the lock.
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, key); uerr != nil {
			_ = conn.Conn().Close(uctx)
		}
	}()
	return true, f(conn)
}

// EnsureRanges creates ranges until the newest one ends at or above until,
// each ending at next(its start) (next(k) > k: the partition grid). The
// first run after migration 007 also moves the rows written meanwhile out
// of the default partitions into the first range and drops them. It
// returns the ranges created; none when another syncer holds the ranges'
// lock (it does the work).
func (s *Store) EnsureRanges(ctx context.Context, until int64, next func(int64) int64) ([]Range, error) {
	var created []Range
	_, err := s.withLock(ctx, lockRanges, func(conn *pgxpool.Conn) error {
		r, err := s.adoptDefault(ctx, conn, next)
		if err != nil {
			return err
		}
		if r != nil {
			created = append(created, *r)
		}
		var hi int64
		if err := conn.QueryRow(ctx, `SELECT max(hi) FROM data_range`).Scan(&hi); err != nil {
			return err
		}
		for hi < until {
			nx := next(hi)
			if nx <= hi {
				return fmt.Errorf("partition grid: next(%d) = %d is not above it", hi, nx)
			}
			r := Range{Name: RangeName(hi), Lo: hi, Hi: nx}
			err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error { return createRange(ctx, tx, r) })
			if err != nil {
				return fmt.Errorf("create range %s: %w", r.Name, err)
			}
			created = append(created, r)
			hi = nx
		}
		return nil
	})
	if err != nil {
		return created, fmt.Errorf("store: ensure ranges: %w", err)
	}
	return created, nil
}

// createRange creates and attaches r's partitions (empty: attaching them
// costs no scan) and records r, in tx. Attaching takes SHARE UPDATE
// EXCLUSIVE on the parents: reads and writes go on meanwhile.
func createRange(ctx context.Context, tx pgx.Tx, r Range) error {
	stmts := []string{`SET LOCAL lock_timeout = '` + ddlLockTimeout + `'`}
	for _, base := range rangeBases {
		stmts = append(stmts, newPartition(base, r, r.Gen)...)
		stmts = append(stmts, fmt.Sprintf(`ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)`,
			base, ident(tableName(base, r, r.Gen)), r.Lo, r.Hi))
	}
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	_, err := tx.Exec(ctx, `INSERT INTO data_range (name, lo, hi, gen) VALUES ($1, $2, $3, $4)`, r.Name, r.Lo, r.Hi, r.Gen)
	return err
}

// newPartition creates the (unattached) table of base for r at gen, with
// the indexes a partition of base has beyond the parent's own (which
// attaching creates): msg_content's unique send key and conv_seq per
// range (see sql/007).
func newPartition(base string, r Range, gen int) []string {
	name := tableName(base, r, gen)
	q := []string{
		fmt.Sprintf(`CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS)`, ident(name), base),
		fmt.Sprintf(`COMMENT ON TABLE %s IS '%s'`, ident(name), rangeComment),
	}
	if base == "msg_content" {
		q = append(q,
			fmt.Sprintf(`CREATE UNIQUE INDEX %s ON %s (sender_uid, client_msg_id)`, ident(name+"_send_key"), ident(name)),
			fmt.Sprintf(`CREATE UNIQUE INDEX %s ON %s (conv_id, conv_seq)`, ident(name+"_conv_seq"), ident(name)))
	}
	return q
}

// adoptDefault moves the rows of the default partitions (written between
// migration 007 and the first ranges) into a new first range and drops
// the default partitions, in one short transaction: the only time the
// parents are locked for writes (the default partitions hold what a
// moment of traffic wrote).
func (s *Store) adoptDefault(ctx context.Context, conn *pgxpool.Conn, next func(int64) int64) (*Range, error) {
	var has bool
	err := conn.QueryRow(ctx, `SELECT partdefid <> 0 FROM pg_partitioned_table WHERE partrelid = 'msg_content'::regclass`).Scan(&has)
	if err != nil || !has {
		return nil, err
	}
	var r Range
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, q := range []string{
			`SET LOCAL lock_timeout = '` + ddlLockTimeout + `'`,
			`ALTER TABLE msg_content DETACH PARTITION msg_content_default`,
			`ALTER TABLE inbox_archive DETACH PARTITION inbox_archive_default`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		var lo, top int64
		err := tx.QueryRow(ctx, `
			SELECT (SELECT max(hi) FROM data_range),
			       GREATEST((SELECT coalesce(max(msg_id), 0) FROM msg_content_default),
			                (SELECT coalesce(max(tkey), 0) FROM inbox_archive_default))`).Scan(&lo, &top)
		if err != nil {
			return err
		}
		r = Range{Name: RangeName(lo), Lo: lo, Hi: next(max(lo, top))}
		if err := createRange(ctx, tx, r); err != nil {
			return err
		}
		for _, q := range []string{
			`INSERT INTO msg_content SELECT * FROM msg_content_default`,
			`INSERT INTO inbox_archive SELECT * FROM inbox_archive_default`,
			`DROP TABLE msg_content_default`,
			`DROP TABLE inbox_archive_default`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("adopt the default partitions: %w", err)
	}
	return &r, nil
}

// ExpireStats is what expiring one range did.
type ExpireStats struct {
	Range     Range
	Dropped   bool             // the range is gone (nothing of it was held)
	Rebuilt   bool             // the range was rebuilt with only held conversations' rows
	Removed   map[string]int64 // rows removed, per table
	Kept      int64            // rows kept for held conversations (both tables)
	Bytes     int64            // disk freed (the partitions' size with indexes, less what was kept)
	Horizons  int64            // conversations whose retention horizon moved
	Unchanged bool             // nothing to do: every row left is a held conversation's
}

// ExpireRange removes range r (every key of it older than the retention
// horizon) except the rows of conversations under legal hold:
//
//  1. the retention horizon of every conversation with messages in r (not
//     held) is raised to its last conv_seq in r, in batches of batch
//     conversations, before anything is removed: a read that meets a
//     missing body always knows why;
//  2. holding the hold lock (SetHold waits for it), the conversations
//     held now with messages in r are looked up;
//  3. none: r's partitions are detached (CONCURRENTLY: no lock stops
//     reads or writes of the parents) and dropped;
//     some: their rows are copied into new partitions for r, which
//     replace the old ones in one short transaction, and the old ones are
//     dropped. Their horizons are put back below what was kept (a
//     conversation held after step 1 read it).
//
// onBatch is called after each batch of step 1 with the conversations it
// covered. An interrupted run leaves nothing inconsistent: horizons
// raised early only say "expired" of rows about to go; Reconcile finishes
// a drop and removes half-built partitions.
func (s *Store) ExpireRange(ctx context.Context, r Range, batch int, onBatch func(convs int)) (ExpireStats, error) {
	st := ExpireStats{Range: r, Removed: map[string]int64{}}
	if batch <= 0 {
		batch = 5000
	}
	if r.Gen > 0 {
		// A rebuilt range holds only the rows of r.Kept: while all of them
		// are still held there is nothing to remove, and nothing to read.
		held, err := s.Holds(ctx)
		if err != nil {
			return st, err
		}
		if containsAll(held, r.Kept) {
			st.Unchanged = true
			return st, nil
		}
	}
	// One connection does it all (the pool's others serve traffic): the
	// ranges' lock for the whole run, the hold lock from step 2 on.
	ok, err := s.withLock(ctx, lockRanges, func(conn *pgxpool.Conn) error {
		n, rows, err := s.recordHorizons(ctx, conn, r, batch, onBatch)
		if err != nil {
			return err
		}
		st.Horizons = n
		st.Removed["msg_content"] = rows
		if s.afterHorizons != nil {
			s.afterHorizons()
		}
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lockHold); err != nil {
			return err
		}
		defer func() {
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, lockHold); err != nil {
				_ = conn.Conn().Close(uctx)
			}
		}()
		keep, err := heldWithRows(ctx, conn, r)
		if err != nil {
			return err
		}
		if len(keep) == 0 {
			return s.dropRange(ctx, conn, r, &st)
		}
		return s.rebuildRange(ctx, conn, r, keep, &st)
	})
	if err != nil {
		return st, fmt.Errorf("store: expire range %s: %w", r.Name, err)
	}
	if !ok {
		st.Unchanged = true // another syncer holds the ranges
	}
	return st, nil
}

func containsAll(set, sub []int64) bool {
	for _, x := range sub {
		if !slices.Contains(set, x) {
			return false
		}
	}
	return true
}

// recordHorizons raises conv_expiry for every conversation with messages
// in r that is not held, streaming one read of r's msg_content partition
// (grouped by conversation) into upserts of batch rows each. It returns
// the conversations and the messages it saw.
func (s *Store) recordHorizons(ctx context.Context, conn *pgxpool.Conn, r Range, batch int, onBatch func(int)) (convs, msgs int64, err error) {
	rows, err := conn.Query(ctx, fmt.Sprintf(`
		SELECT p.conv_id, max(p.conv_seq), max(p.msg_id), count(*)
		FROM %s p
		WHERE NOT EXISTS (SELECT 1 FROM conv_hold h WHERE h.conv_id = p.conv_id)
		GROUP BY p.conv_id`, ident(tableName("msg_content", r, r.Gen))))
	if err != nil {
		return 0, 0, fmt.Errorf("store: horizons of range %s: %w", r.Name, err)
	}
	defer rows.Close()
	var cs, seqs, mids []int64
	flush := func() error {
		if len(cs) == 0 {
			return nil
		}
		_, err := s.Pool.Exec(ctx, `
			INSERT INTO conv_expiry (conv_id, expired_seq, expired_msg_id)
			SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[])
			ON CONFLICT (conv_id) DO UPDATE
			SET expired_seq = EXCLUDED.expired_seq, expired_msg_id = EXCLUDED.expired_msg_id, updated_at = now()
			WHERE conv_expiry.expired_seq < EXCLUDED.expired_seq`, cs, seqs, mids)
		if err != nil {
			return err
		}
		if onBatch != nil {
			onBatch(len(cs))
		}
		convs += int64(len(cs))
		cs, seqs, mids = cs[:0], seqs[:0], mids[:0]
		return nil
	}
	for rows.Next() {
		var c, seq, mid, n int64
		if err := rows.Scan(&c, &seq, &mid, &n); err != nil {
			return convs, msgs, err
		}
		cs, seqs, mids = append(cs, c), append(seqs, seq), append(mids, mid)
		msgs += n
		if len(cs) >= batch {
			if err := flush(); err != nil {
				return convs, msgs, fmt.Errorf("store: record horizons of range %s: %w", r.Name, err)
			}
		}
	}
	if err := rows.Err(); err != nil {
		return convs, msgs, fmt.Errorf("store: horizons of range %s: %w", r.Name, err)
	}
	if err := flush(); err != nil {
		return convs, msgs, fmt.Errorf("store: record horizons of range %s: %w", r.Name, err)
	}
	return convs, msgs, nil
}

// heldWithRows returns the held conversations with messages in r (one
// index probe per held conversation).
func heldWithRows(ctx context.Context, conn *pgxpool.Conn, r Range) ([]int64, error) {
	rows, err := conn.Query(ctx, fmt.Sprintf(`
		SELECT h.conv_id FROM conv_hold h
		WHERE EXISTS (SELECT 1 FROM %s m WHERE m.conv_id = h.conv_id)
		ORDER BY h.conv_id`, ident(tableName("msg_content", r, r.Gen))))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// partitionSize returns a table's size with its indexes (0 when it is gone).
func partitionSize(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, name string) (int64, error) {
	var n *int64
	err := q.QueryRow(ctx, `SELECT pg_total_relation_size(to_regclass($1))`, ident(name)).Scan(&n)
	if n == nil {
		return 0, err
	}
	return *n, err
}

// dropRange detaches r's partitions concurrently and drops them. It runs
// on conn outside a transaction (DETACH CONCURRENTLY cannot run in one).
func (s *Store) dropRange(ctx context.Context, conn *pgxpool.Conn, r Range, st *ExpireStats) error {
	var n int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+ident(tableName("inbox_archive", r, r.Gen))).Scan(&n); err != nil {
		return err
	}
	st.Removed["inbox_archive"] = n
	for _, base := range rangeBases {
		size, err := partitionSize(ctx, conn, tableName(base, r, r.Gen))
		if err != nil {
			return err
		}
		st.Bytes += size
		if err := detachConcurrently(ctx, conn, base, tableName(base, r, r.Gen)); err != nil {
			return err
		}
	}
	if err := finishDrop(ctx, conn, r); err != nil {
		return err
	}
	st.Dropped = true
	return nil
}

// detachConcurrently detaches a partition without locking its parent for
// reads or writes (it waits for the transactions that may use it).
func detachConcurrently(ctx context.Context, conn *pgxpool.Conn, base, name string) error {
	var attached bool
	err := conn.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1) AND inhparent = $2::regclass)`,
		ident(name), base).Scan(&attached)
	if err != nil || !attached {
		return err
	}
	if _, err := conn.Exec(ctx, `SET lock_timeout = '`+ddlLockTimeout+`'`); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(context.Background(), `RESET lock_timeout`) }()
	q := fmt.Sprintf(`ALTER TABLE %s DETACH PARTITION %s CONCURRENTLY`, base, ident(name))
	if _, err := conn.Exec(ctx, q); err != nil {
		return fmt.Errorf("%s: %w", q, err)
	}
	return nil
}

// finishDrop drops r's (detached) partitions and forgets r.
func finishDrop(ctx context.Context, conn *pgxpool.Conn, r Range) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, base := range rangeBases {
			if _, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+ident(tableName(base, r, r.Gen))); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `DELETE FROM data_range WHERE name = $1`, r.Name)
		return err
	})
}

// rebuildRange replaces r's partitions by copies holding only the rows of
// the conversations keep (held), swapped in one short transaction, and
// drops the old ones.
func (s *Store) rebuildRange(ctx context.Context, conn *pgxpool.Conn, r Range, keep []int64, st *ExpireStats) error {
	gen := r.Gen + 1
	// The kept conversations' horizons: below what stays (step 1 may have
	// raised one that was held only after it read r).
	_, err := conn.Exec(ctx, fmt.Sprintf(`
		UPDATE conv_expiry e SET expired_seq = k.lowest - 1, updated_at = now()
		FROM (SELECT conv_id, min(conv_seq) AS lowest FROM %s WHERE conv_id = ANY($1::bigint[]) GROUP BY conv_id) k
		WHERE e.conv_id = k.conv_id AND e.expired_seq >= k.lowest`, ident(tableName("msg_content", r, r.Gen))), keep)
	if err != nil {
		return fmt.Errorf("restore the horizons of held conversations: %w", err)
	}
	for _, base := range rangeBases {
		old, fresh := tableName(base, r, r.Gen), tableName(base, r, gen)
		if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS `+ident(fresh)); err != nil { // a half-built copy
			return err
		}
		for _, q := range newPartition(base, r, gen) {
			if _, err := conn.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		var total int64
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+ident(old)).Scan(&total); err != nil {
			return err
		}
		tag, err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO %s SELECT * FROM %s WHERE conv_id = ANY($1::bigint[])`,
			ident(fresh), ident(old)), keep)
		if err != nil {
			return fmt.Errorf("copy the held rows of %s: %w", old, err)
		}
		st.Removed[base] = total - tag.RowsAffected()
		st.Kept += tag.RowsAffected()
		oldSize, err := partitionSize(ctx, conn, old)
		if err != nil {
			return err
		}
		newSize, err := partitionSize(ctx, conn, fresh)
		if err != nil {
			return err
		}
		st.Bytes += oldSize - newSize
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		stmts := []string{`SET LOCAL lock_timeout = '` + ddlLockTimeout + `'`}
		for _, base := range rangeBases {
			stmts = append(stmts,
				fmt.Sprintf(`ALTER TABLE %s DETACH PARTITION %s`, base, ident(tableName(base, r, r.Gen))),
				fmt.Sprintf(`ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)`,
					base, ident(tableName(base, r, gen)), r.Lo, r.Hi))
		}
		for _, q := range stmts {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		_, err := tx.Exec(ctx, `UPDATE data_range SET gen = $2, kept = $3 WHERE name = $1`, r.Name, gen, keep)
		return err
	})
	if err != nil {
		return fmt.Errorf("swap in the rebuilt range: %w", err)
	}
	for _, base := range rangeBases {
		if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS `+ident(tableName(base, r, r.Gen))); err != nil {
			return err
		}
	}
	st.Rebuilt = true
	return nil
}

// Reconcile finishes what an interrupted run left: detaches left pending
// (DETACH ... CONCURRENTLY interrupted) are finalized, a range whose
// partitions were partly or wholly detached is dropped (its horizons were
// recorded before), and range tables attached nowhere (a rebuild
// interrupted before or after its swap) are dropped. It takes the ranges'
// lock; false when another syncer holds it.
func (s *Store) Reconcile(ctx context.Context) (bool, error) {
	ok, err := s.withLock(ctx, lockRanges, func(conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, `
			SELECT p.relname, c.relname FROM pg_inherits i
			JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
			WHERE i.inhdetachpending AND p.relname IN ('msg_content', 'inbox_archive')`)
		if err != nil {
			return err
		}
		type pair struct{ parent, child string }
		pending, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (pair, error) {
			var p pair
			err := r.Scan(&p.parent, &p.child)
			return p, err
		})
		if err != nil {
			return err
		}
		for _, p := range pending {
			if _, err := conn.Exec(ctx, fmt.Sprintf(`ALTER TABLE %s DETACH PARTITION %s FINALIZE`, ident(p.parent), ident(p.child))); err != nil {
				return fmt.Errorf("finalize the detach of %s: %w", p.child, err)
			}
		}
		ranges, err := s.Ranges(ctx)
		if err != nil {
			return err
		}
		current := map[string]bool{}
		for _, r := range ranges {
			attached := 0
			for _, base := range rangeBases {
				name := tableName(base, r, r.Gen)
				current[name] = true
				var ok bool
				if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = to_regclass($1))`, ident(name)).Scan(&ok); err != nil {
					return err
				}
				if ok {
					attached++
				}
			}
			if attached == len(rangeBases) {
				continue
			}
			// A drop was under way: finish it.
			for _, base := range rangeBases {
				if err := detachConcurrently(ctx, conn, base, tableName(base, r, r.Gen)); err != nil {
					return err
				}
			}
			if err := finishDrop(ctx, conn, r); err != nil {
				return err
			}
		}
		rows, err = conn.Query(ctx, `
			SELECT c.relname FROM pg_class c
			WHERE c.relkind = 'r' AND obj_description(c.oid, 'pg_class') = $1
			  AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid)`, rangeComment)
		if err != nil {
			return err
		}
		loose, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, name := range loose {
			if current[name] {
				continue
			}
			if _, err := conn.Exec(ctx, `DROP TABLE IF EXISTS `+ident(name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return ok, fmt.Errorf("store: reconcile ranges: %w", err)
	}
	return ok, nil
}

// RangeFloor is the lowest key any range covers: rows below it have no
// partition (their range expired).
func (s *Store) RangeFloor(ctx context.Context) (int64, error) {
	var lo *int64
	if err := s.Pool.QueryRow(ctx, `SELECT min(lo) FROM data_range`).Scan(&lo); err != nil {
		return 0, fmt.Errorf("store: range floor: %w", err)
	}
	if lo == nil {
		return 0, errors.New("store: no ranges (migration 007 not applied?)")
	}
	return *lo, nil
}

// RangeGrid returns the partition grid of width: next(k), the first range
// boundary above key k. Width 0 cuts calendar months (UTC); any other
// width (at least a millisecond) cuts spans of it from ids.Epoch.
func RangeGrid(width time.Duration) func(int64) int64 {
	if width <= 0 {
		return func(k int64) int64 {
			t := ids.Time(k).UTC()
			return ids.AtTime(time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC))
		}
	}
	w := max(width.Milliseconds(), 1)
	return func(k int64) int64 {
		ms := ids.Time(k).Sub(ids.Epoch).Milliseconds()
		n := ms / w
		if ms%w < 0 {
			n--
		}
		return ids.AtTime(ids.Epoch.Add(time.Duration((n+1)*w) * time.Millisecond))
	}
}
