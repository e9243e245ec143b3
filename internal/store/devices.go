package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ActiveDevices returns the devices of uid seen since since (their
// device_cursor row's last_seen_at, refreshed while they are connected),
// at most limit of them; device comes first when it is one of them, so
// that a caller can tell it apart however many there are. The devices
// seen within the consumer reap period are those whose cursor consumers
// still exist: what a device cap counts.
func (s *Store) ActiveDevices(ctx context.Context, uid int64, device string, since time.Time, limit int) ([]string, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT device FROM device_cursor WHERE uid = $1 AND last_seen_at > $2
		ORDER BY device = $3 DESC, last_seen_at DESC LIMIT $4`, uid, since, device, limit)
	if err != nil {
		return nil, fmt.Errorf("store: active devices of %d: %w", uid, err)
	}
	var out []string
	var d string
	_, err = pgx.ForEachRow(rows, []any{&d}, func() error { out = append(out, d); return nil })
	if err != nil {
		return nil, fmt.Errorf("store: active devices of %d: %w", uid, err)
	}
	return out, nil
}
