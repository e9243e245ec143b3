package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Housekeeping removes rows nothing needs any more, in small batches (one
// short statement each, never a long transaction). Bytes are what the
// removed rows held (pg_column_size of each row, without index entries and
// page overhead): what vacuum can reuse, an underestimate of the disk.

// ForgetDevices deletes up to limit device_cursor rows of devices not
// seen since unseenBefore and returns them (their consumers are to go
// too) and the bytes they held. The condition is checked again by the
// DELETE itself, so a device that connects meanwhile keeps its row.
// device_cursor has no index on last_seen_at (see sql/008): each batch
// scans the table until it has found limit rows.
func (s *Store) ForgetDevices(ctx context.Context, unseenBefore time.Time, limit int) ([]DeviceCursor, int64, error) {
	rows, err := s.Pool.Query(ctx, `
		DELETE FROM device_cursor d USING (
			SELECT uid, device FROM device_cursor WHERE last_seen_at < $1 LIMIT $2) old
		WHERE d.uid = old.uid AND d.device = old.device AND d.last_seen_at < $1
		RETURNING d.uid, d.device, d.consumer, d.ack_seq, pg_column_size(d.*)`, unseenBefore, limit)
	if err != nil {
		return nil, 0, fmt.Errorf("store: forget devices: %w", err)
	}
	var out []DeviceCursor
	var bytes int64
	var c DeviceCursor
	var seq, size int64
	_, err = pgx.ForEachRow(rows, []any{&c.UID, &c.Device, &c.Consumer, &seq, &size}, func() error {
		c.AckSeq = uint64(seq)
		out = append(out, c)
		bytes += size
		return nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("store: forget devices: %w", err)
	}
	return out, bytes, nil
}

// ExpireRejects deletes up to limit send_reject rows created before
// before, oldest first (index send_reject_by_time), and returns how many
// and the bytes they held.
func (s *Store) ExpireRejects(ctx context.Context, before time.Time, limit int) (n, bytes int64, err error) {
	err = s.Pool.QueryRow(ctx, `
		WITH gone AS (
			DELETE FROM send_reject r USING (
				SELECT sender_uid, client_msg_id FROM send_reject WHERE created_at < $1
				ORDER BY created_at LIMIT $2) old
			WHERE r.sender_uid = old.sender_uid AND r.client_msg_id = old.client_msg_id
			RETURNING pg_column_size(r.*) AS size)
		SELECT count(*), coalesce(sum(size), 0) FROM gone`, before, limit).Scan(&n, &bytes)
	if err != nil {
		return 0, 0, fmt.Errorf("store: expire send rejects: %w", err)
	}
	return n, bytes, nil
}

// UnseenConsumers returns those of the consumer names whose device was not
// seen since unseenBefore (by device_cursor_consumer, the unique index on
// the name). A name without a row is not returned: a device whose first
// cursor is not mirrored yet.
func (s *Store) UnseenConsumers(ctx context.Context, names []string, unseenBefore time.Time) ([]string, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT consumer FROM device_cursor WHERE consumer = ANY($1::text[]) AND last_seen_at < $2`, names, unseenBefore)
	if err != nil {
		return nil, fmt.Errorf("store: unseen consumers: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("store: unseen consumers: %w", err)
	}
	return out, nil
}
