package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Hold is a conversation's legal hold state.
type Hold struct {
	ConvID int64      `json:"conv_id"`
	Held   bool       `json:"hold"`
	HeldAt *time.Time `json:"held_at,omitempty"`
}

// SetHold puts a conversation under legal hold (retention keeps its
// messages and inbox entries however old) or lifts it (retention removes
// what is past the horizon at its next run). It waits while retention is
// dropping a range (the hold lock): a hold set then applies from the next
// range on, never half-way through one. ErrConvNotFound when the
// conversation does not exist.
func (s *Store) SetHold(ctx context.Context, conv int64, on bool) (Hold, error) {
	h := Hold{ConvID: conv, Held: on}
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, lockHold); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM conversation WHERE conv_id = $1)`, conv).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return ErrConvNotFound
		}
		if !on {
			_, err := tx.Exec(ctx, `DELETE FROM conv_hold WHERE conv_id = $1`, conv)
			return err
		}
		var at time.Time
		err := tx.QueryRow(ctx, `
			INSERT INTO conv_hold (conv_id) VALUES ($1)
			ON CONFLICT (conv_id) DO UPDATE SET held_at = conv_hold.held_at
			RETURNING held_at`, conv).Scan(&at)
		h.HeldAt = &at
		return err
	})
	if err != nil {
		return h, fmt.Errorf("store: hold of conversation %d: %w", conv, err)
	}
	return h, nil
}

// Holds returns the conversations under legal hold, ascending.
func (s *Store) Holds(ctx context.Context) ([]int64, error) {
	rows, err := s.Pool.Query(ctx, `SELECT conv_id FROM conv_hold ORDER BY conv_id`)
	if err != nil {
		return nil, fmt.Errorf("store: holds: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("store: holds: %w", err)
	}
	return out, nil
}

// Horizons returns the retention horizon (the conv_seq up to which
// retention removed the messages) of each conversation that has one.
func (s *Store) Horizons(ctx context.Context, convs []int64) (map[int64]int64, error) {
	rows, err := s.Pool.Query(ctx, `SELECT conv_id, expired_seq FROM conv_expiry WHERE conv_id = ANY($1::bigint[]) AND expired_seq > 0`, convs)
	if err != nil {
		return nil, fmt.Errorf("store: horizons: %w", err)
	}
	out := map[int64]int64{}
	var c, seq int64
	_, err = pgx.ForEachRow(rows, []any{&c, &seq}, func() error { out[c] = seq; return nil })
	if err != nil {
		return nil, fmt.Errorf("store: horizons: %w", err)
	}
	return out, nil
}

// HeldConversations returns which of convIDs are under their own legal
// hold (conv_hold). A user deletion keeps the bodies the user sent in held
// conversations (and every body under the installation-wide hold, a
// setting of the syncer).
func (s *Store) HeldConversations(ctx context.Context, convIDs []int64) (map[int64]bool, error) {
	rows, err := s.Pool.Query(ctx, `SELECT conv_id FROM conv_hold WHERE conv_id = ANY($1::bigint[])`, convIDs)
	if err != nil {
		return nil, fmt.Errorf("store: held conversations: %w", err)
	}
	out := map[int64]bool{}
	var c int64
	if _, err := pgx.ForEachRow(rows, []any{&c}, func() error { out[c] = true; return nil }); err != nil {
		return nil, fmt.Errorf("store: held conversations: %w", err)
	}
	return out, nil
}
