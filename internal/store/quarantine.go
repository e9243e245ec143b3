package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// QuarantinedEntry is an inbox entry the archiver could not decode, kept in
// inbox_quarantine with its raw bytes (ArchiveBatch writes it).
type QuarantinedEntry struct {
	Partition int
	Seq       uint64
	Subject   string
	Raw       []byte
	Err       string
	At        time.Time
}

// A quarantined entry is written once: the archiver may hand the same
// batch over again after a failed commit.
const sqlQuarantine = `
	INSERT INTO inbox_quarantine (partition, seq, subject, raw, error) VALUES ($1, $2, $3, $4, $5)
	ON CONFLICT DO NOTHING`

// QuarantineCount returns how many entries inbox_quarantine holds.
func (s *Store) QuarantineCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox_quarantine`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: quarantine count: %w", err)
	}
	return n, nil
}

// Quarantined returns up to limit quarantined entries in (partition, seq)
// order.
func (s *Store) Quarantined(ctx context.Context, limit int) ([]QuarantinedEntry, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT partition, seq, subject, raw, error, at FROM inbox_quarantine ORDER BY partition, seq LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: quarantined entries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QuarantinedEntry, error) {
		var q QuarantinedEntry
		var seq int64
		err := r.Scan(&q.Partition, &seq, &q.Subject, &q.Raw, &q.Err, &q.At)
		q.Seq = uint64(seq)
		return q, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: quarantined entries: %w", err)
	}
	return out, nil
}
