package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/internal/ids"
)

// ArchiveEpoch is what archive_progress records of an INBOX partition:
// its archive mark and the stream the mark belongs to (docs/operations.md
// "Restore and stream epochs").
type ArchiveEpoch struct {
	Archived uint64 // archived_seq
	// StreamEpoch is the creation time (ns) of the stream the syncer last
	// checked against the mark; 0: none recorded yet.
	StreamEpoch uint64
	// Start is the first sequence of that stream's epoch: 0 or 1 for the
	// stream the installation was created with, above every earlier
	// sequence for one the syncer recreated or renumbered.
	Start uint64
}

// ArchiveEpochs returns the archive_progress row of every partition that
// has one.
func (s *Store) ArchiveEpochs(ctx context.Context) (map[int]ArchiveEpoch, error) {
	rows, err := s.Pool.Query(ctx, `SELECT partition, archived_seq, stream_epoch, epoch_start FROM archive_progress`)
	if err != nil {
		return nil, fmt.Errorf("store: archive epochs: %w", err)
	}
	out := map[int]ArchiveEpoch{}
	var p int
	var seq, epoch, start int64
	_, err = pgx.ForEachRow(rows, []any{&p, &seq, &epoch, &start}, func() error {
		out[p] = ArchiveEpoch{Archived: uint64(seq), StreamEpoch: uint64(epoch), Start: uint64(start)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: archive epochs: %w", err)
	}
	return out, nil
}

// ErrMarkMoved: the archive mark rose above a new epoch's start meanwhile
// (a batch of the lost stream committed): the stream must be numbered
// above it again.
var ErrMarkMoved = errors.New("store: the archive mark rose above the new stream's first sequence")

// RecordEpoch records that partition p's stream is the one created at
// epoch, whose sequences start at start (0 or 1: the installation's first
// stream), and raises the archive mark to start-1: no entry below start
// exists in that stream, and the ones of the stream before that were not
// archived are gone with it. It fails with ErrMarkMoved if the mark is at
// or above start already (an archive batch of the stream before committed
// after start was chosen: its entries hold sequences from start on).
func (s *Store) RecordEpoch(ctx context.Context, p int, epoch, start uint64) error {
	tag, err := s.Pool.Exec(ctx, `
		INSERT INTO archive_progress (partition, archived_seq, stream_epoch, epoch_start, updated_at)
		VALUES ($1, GREATEST($3::bigint - 1, 0), $2, $3, now())
		ON CONFLICT (partition) DO UPDATE
		SET archived_seq = GREATEST(archive_progress.archived_seq, EXCLUDED.archived_seq),
		    stream_epoch = EXCLUDED.stream_epoch, epoch_start = EXCLUDED.epoch_start, updated_at = now()
		WHERE $3 <= 1 OR archive_progress.archived_seq < $3`,
		p, int64(epoch), int64(start))
	if err != nil {
		return fmt.Errorf("store: record the stream epoch of partition %d: %w", p, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("partition %d, epoch start %d: %w", p, start, ErrMarkMoved)
	}
	return nil
}

// HighestCursor returns the highest mirrored device cursor of the users of
// INBOX partition p (of n): a recreated stream must start above it.
func (s *Store) HighestCursor(ctx context.Context, p, n int) (uint64, error) {
	highs, err := s.HighestCursors(ctx, n)
	if err != nil {
		return 0, err
	}
	return highs[p], nil
}

// HighestCursors returns, for each of the n INBOX partitions, the highest
// mirrored device cursor of its users. It reads every device_cursor row
// (at a start, a reconnect or a fence: rarely).
func (s *Store) HighestCursors(ctx context.Context, n int) ([]uint64, error) {
	rows, err := s.Pool.Query(ctx, `SELECT uid, max(ack_seq) FROM device_cursor GROUP BY uid`)
	if err != nil {
		return nil, fmt.Errorf("store: highest device cursors: %w", err)
	}
	var uid, seq int64
	highs := make([]uint64, n)
	_, err = pgx.ForEachRow(rows, []any{&uid, &seq}, func() error {
		p := ids.Partition(uid, n)
		highs[p] = max(highs[p], uint64(seq))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: highest device cursors: %w", err)
	}
	return highs, nil
}
