package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// What the early cleanup (internal/archive, cleanup.go) reads: the users
// that have inbox entries, in uid order, with the lowest confirmed cursor
// of their devices, and where a user's new-device window begins. Each is
// one statement, bounded by the batch it asks for: no transaction is held
// between them.

// CleanupUser is one user the early cleanup looks at.
type CleanupUser struct {
	UID int64
	// Devices is the number of the user's device_cursor rows: every device
	// that still counts, whether or not its consumer exists.
	Devices int
	// LowestAck is the lowest ack_seq among them (0 when Devices is 0).
	LowestAck uint64
}

// CleanupUsers returns up to limit users with archived inbox entries and
// uid > after, in uid order, each with its device rows' count and lowest
// ack_seq. It walks the (uid, seq) index of inbox_archive one distinct uid
// at a time (a loose index scan: one index descent per user, whatever the
// user's history), so a round costs its batch, not the table.
func (s *Store) CleanupUsers(ctx context.Context, after int64, limit int) ([]CleanupUser, error) {
	rows, err := s.Pool.Query(ctx, `
		WITH RECURSIVE u(uid) AS (
			(SELECT uid FROM inbox_archive WHERE uid > $1 ORDER BY uid LIMIT 1)
			UNION ALL
			SELECT (SELECT a.uid FROM inbox_archive a WHERE a.uid > u.uid ORDER BY a.uid LIMIT 1)
			FROM u WHERE u.uid IS NOT NULL
		)
		SELECT b.uid, d.n, coalesce(d.low, 0)
		FROM (SELECT uid FROM u WHERE uid IS NOT NULL LIMIT $2) b
		CROSS JOIN LATERAL (SELECT count(*) AS n, min(ack_seq) AS low FROM device_cursor c WHERE c.uid = b.uid) d
		ORDER BY b.uid`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: cleanup users after %d: %w", after, err)
	}
	out := make([]CleanupUser, 0, limit)
	var u CleanupUser
	var low int64
	_, err = pgx.ForEachRow(rows, []any{&u.UID, &u.Devices, &low}, func() error {
		u.LowestAck = uint64(low)
		out = append(out, u)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: cleanup users after %d: %w", after, err)
	}
	return out, nil
}

// NthNewestSeqsUpTo is NthNewestSeq for many users at once, each counting
// only its archived entries with seq <= its upTo: for uids[i] the seq of
// its n-th newest entry at or below upTos[i]. Users with fewer such entries
// are absent from the result. One statement; each user costs at most n
// entries of the (uid, seq) index.
func (s *Store) NthNewestSeqsUpTo(ctx context.Context, uids []int64, upTos []uint64, n int) (map[int64]uint64, error) {
	if len(uids) != len(upTos) {
		return nil, fmt.Errorf("store: n-th newest entries: %d uids, %d bounds", len(uids), len(upTos))
	}
	if n < 1 {
		return nil, fmt.Errorf("store: n-th newest entries: n = %d, want at least 1", n)
	}
	out := make(map[int64]uint64, len(uids))
	if len(uids) == 0 {
		return out, nil
	}
	bounds := make([]int64, len(upTos))
	for i, b := range upTos {
		bounds[i] = int64(min(b, 1<<63-1))
	}
	rows, err := s.Pool.Query(ctx, `
		SELECT t.uid, w.low
		FROM unnest($1::bigint[], $2::bigint[]) AS t(uid, up_to)
		CROSS JOIN LATERAL (
			SELECT min(seq) AS low, count(*) AS got FROM (
				SELECT seq FROM inbox_archive a WHERE a.uid = t.uid AND a.seq <= t.up_to ORDER BY a.seq DESC LIMIT $3) newest
		) w
		WHERE w.got = $3`, uids, bounds, n)
	if err != nil {
		return nil, fmt.Errorf("store: n-th newest entries: %w", err)
	}
	var uid, low int64
	_, err = pgx.ForEachRow(rows, []any{&uid, &low}, func() error {
		out[uid] = uint64(low)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: n-th newest entries: %w", err)
	}
	return out, nil
}
