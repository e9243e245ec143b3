package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/inboxd/inboxd/internal/ids"
)

// TableUsage is what one table holds on disk (inboxctl usage).
type TableUsage struct {
	Name string `json:"name"`
	// Entries is the table's row count: counted when the statistics put
	// it below ExactCountBelow, else their estimate (Estimated true).
	Entries   int64 `json:"entries"`
	Estimated bool  `json:"entries_estimated"`
	// Bytes is pg_total_relation_size: rows, TOAST and indexes, summed
	// over the partitions of a partitioned table.
	Bytes int64 `json:"bytes"`
	// Oldest is the time of the oldest entry where the table has one that
	// an index finds (nil otherwise, or when it is empty).
	Oldest *time.Time `json:"oldest,omitempty"`
}

// ExactCountBelow is the estimated row count up to which TablesUsage counts
// rows exactly (a count this size takes well under a second).
const ExactCountBelow = 1_000_000

// sqlTableStats lists the schema's tables (a partitioned table once, with
// its partitions' sums) with their total size and their row estimate: the
// larger of the statistics collector's live rows (current within seconds)
// and the planner's reltuples (as of the last analyze; -1 before).
// pg_partition_tree lists a partitioned table's tree and nothing for a
// plain table, which stands for itself.
const sqlTableStats = `
	WITH t AS (
		SELECT c.oid AS root, c.relname, coalesce(pt.relid, c.oid) AS relid, coalesce(pt.isleaf, true) AS isleaf
		FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace
		LEFT JOIN LATERAL pg_partition_tree(c.oid) pt ON c.relkind = 'p'
		WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition)
	SELECT t.relname, sum(pg_total_relation_size(t.relid))::bigint,
	       coalesce(sum(GREATEST(coalesce(s.n_live_tup, 0), p.reltuples, 0)) FILTER (WHERE t.isleaf), 0)::bigint
	FROM t
	JOIN pg_class p ON p.oid = t.relid
	LEFT JOIN pg_stat_user_tables s ON s.relid = t.relid
	GROUP BY t.root, t.relname
	ORDER BY t.relname`

// oldestOf is, per table with a time an index reaches cheaply, the query
// of its oldest entry's time. inbox_archive has no time column: its oldest
// entry is the oldest message it refers to, whose msg_id carries the time
// it was sent (oldestByMsgID).
var oldestOf = map[string]string{
	"msg_content":   `SELECT created_at FROM msg_content ORDER BY msg_id LIMIT 1`,
	"conversation":  `SELECT created_at FROM conversation ORDER BY conv_id LIMIT 1`,
	"send_reject":   `SELECT min(created_at) FROM send_reject`,
	"user_deletion": `SELECT min(requested_at) FROM user_deletion`,
	// No index on last_seen_at (sql/008): one scan of a row per device,
	// for the device seen longest ago.
	"device_cursor": `SELECT min(last_seen_at) FROM device_cursor`,
}

var oldestByMsgID = map[string]string{
	"inbox_archive": `SELECT min(msg_id) FROM inbox_archive WHERE msg_id <> 0`,
}

// TablesUsage returns, for each table of the schema, its entries, bytes
// and oldest entry.
//
// Its reads take a share lock on each partition in the catalogue's order,
// while the syncer's range DDL (a partition created, attached or
// detached) locks the parent first: the two can deadlock, and Postgres
// then aborts one of them. The report is read again (at most 3 times in
// all); the DDL, if it was the one aborted, runs again at the syncer's
// next round.
func (s *Store) TablesUsage(ctx context.Context) ([]TableUsage, error) {
	for attempt := 1; ; attempt++ {
		out, err := s.tablesUsage(ctx)
		var pe *pgconn.PgError
		if attempt < 3 && errors.As(err, &pe) && pe.Code == "40P01" { // deadlock_detected
			continue
		}
		return out, err
	}
}

func (s *Store) tablesUsage(ctx context.Context) ([]TableUsage, error) {
	rows, err := s.Pool.Query(ctx, sqlTableStats)
	if err != nil {
		return nil, fmt.Errorf("store: table usage: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TableUsage, error) {
		var u TableUsage
		err := r.Scan(&u.Name, &u.Bytes, &u.Entries)
		return u, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: table usage: %w", err)
	}
	for i := range out {
		u := &out[i]
		if u.Entries < ExactCountBelow {
			if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{u.Name}.Sanitize()).Scan(&u.Entries); err != nil {
				return nil, fmt.Errorf("store: count %s: %w", u.Name, err)
			}
		} else {
			u.Estimated = true
		}
		if q, ok := oldestOf[u.Name]; ok {
			var t *time.Time
			if err := s.Pool.QueryRow(ctx, q).Scan(&t); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return nil, fmt.Errorf("store: oldest of %s: %w", u.Name, err)
			}
			u.Oldest = t
		}
		if q, ok := oldestByMsgID[u.Name]; ok {
			var id *int64
			if err := s.Pool.QueryRow(ctx, q).Scan(&id); err != nil {
				return nil, fmt.Errorf("store: oldest of %s: %w", u.Name, err)
			}
			if id != nil {
				t := ids.Time(*id)
				u.Oldest = &t
			}
		}
	}
	return out, nil
}
