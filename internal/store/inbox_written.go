package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Written is what one fanout batch wrote into the INBOX streams, recorded
// with its fanned_out mark (MarkFannedOut).
type Written struct {
	// SendPartition is the fanout's SEND partition: its row of
	// inbox_written.
	SendPartition int
	// Entries are the message entries published, each with the inbox seq
	// of its PubAck.
	Entries []ArchivedEntry
	// Highs holds, per INBOX partition, the highest seq acknowledged in
	// the batch (0: nothing written there).
	Highs []uint64
}

// queueWritten raises the fanout's row of inbox_written to w.Highs.
func queueWritten(b *pgx.Batch, w Written) {
	highs := make([]int64, len(w.Highs))
	some := false
	for i, h := range w.Highs {
		highs[i] = int64(h)
		some = some || h > 0
	}
	if !some {
		return
	}
	b.Queue(`
		INSERT INTO inbox_written (send_partition, highs) VALUES ($1, $2)
		ON CONFLICT (send_partition) DO UPDATE SET highs = ARRAY(
			SELECT GREATEST(coalesce(o, 0), coalesce(n, 0))
			FROM unnest(inbox_written.highs, EXCLUDED.highs) WITH ORDINALITY AS t(o, n, i) ORDER BY i)`,
		w.SendPartition, highs)
}

// WrittenHighs returns, for each of the n INBOX partitions, the highest
// seq any fanout was acknowledged in it.
func (s *Store) WrittenHighs(ctx context.Context, n int) ([]uint64, error) {
	rows, err := s.Pool.Query(ctx, `SELECT highs FROM inbox_written`)
	if err != nil {
		return nil, fmt.Errorf("store: inbox written highs: %w", err)
	}
	out := make([]uint64, n)
	var highs []int64
	_, err = pgx.ForEachRow(rows, []any{&highs}, func() error {
		for p, h := range highs {
			if p < n && h > 0 {
				out[p] = max(out[p], uint64(h))
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: inbox written highs: %w", err)
	}
	return out, nil
}

// RecordedFloor returns, for each of the n INBOX partitions, the highest
// inbox seq Postgres records of it without reading the device cursors:
// what the fanouts were acknowledged (inbox_written), the archive mark and
// the epoch's start; and the partitions' archive records it read. It is
// the cheap check (a few rows); InboxFloor is the whole one.
func (s *Store) RecordedFloor(ctx context.Context, n int) ([]uint64, map[int]ArchiveEpoch, error) {
	floor, err := s.WrittenHighs(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	recs, err := s.ArchiveEpochs(ctx)
	if err != nil {
		return nil, nil, err
	}
	for p, r := range recs {
		if p < n {
			floor[p] = max(floor[p], r.Archived, max(r.Start, 1)-1)
		}
	}
	return floor, recs, nil
}

// InboxFloor returns, for each of the n INBOX partitions, the highest
// inbox seq Postgres knows of: RecordedFloor and the mirrored device
// cursors (every device_cursor row is read); and the partitions' archive
// records. A stream whose last seq is below its partition's floor lost
// entries that Postgres holds or that a device confirmed; no seq up to
// the floor may be handed out again (docs/design.md, "The inbox index").
func (s *Store) InboxFloor(ctx context.Context, n int) ([]uint64, map[int]ArchiveEpoch, error) {
	floor, recs, err := s.RecordedFloor(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	cursors, err := s.HighestCursors(ctx, n)
	if err != nil {
		return nil, nil, err
	}
	for p, c := range cursors {
		floor[p] = max(floor[p], c)
	}
	return floor, recs, nil
}
