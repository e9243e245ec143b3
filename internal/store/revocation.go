package store

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Revocation is a revoked device of a user (Device "": every device of
// it): its tokens issued up to At are refused.
type Revocation struct {
	UID    int64     `json:"uid"`
	Device string    `json:"device"`
	At     time.Time `json:"revoked_at"`
}

// maxDeviceLen bounds a device id, as auth.MaxDeviceLen does for tokens.
const maxDeviceLen = 128

// A second revocation of the same device moves revoked_at on, never back.
const sqlRevoke = `
	INSERT INTO revocation (uid, device) VALUES ($1, $2)
	ON CONFLICT (uid, device) DO UPDATE SET revoked_at = GREATEST(revocation.revoked_at, EXCLUDED.revoked_at)
	RETURNING revoked_at`

// The latest revocation that covers a device: its own or its user's.
const sqlRevokedAt = `
	SELECT max(revoked_at) FROM revocation WHERE uid = $1 AND device IN ($2, '')`

// Revoke records the revocation of uid's device (device "": every device
// of the user) at the database's now and returns it.
func (s *Store) Revoke(ctx context.Context, uid int64, device string) (time.Time, error) {
	if uid <= 0 {
		return time.Time{}, fmt.Errorf("%w: revoke: uid %d is not positive", ErrInvalid, uid)
	}
	if len(device) > maxDeviceLen || !utf8.ValidString(device) {
		return time.Time{}, fmt.Errorf("%w: revoke: device must be at most %d bytes of UTF-8", ErrInvalid, maxDeviceLen)
	}
	var at time.Time
	if err := s.Pool.QueryRow(ctx, sqlRevoke, uid, device).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("store: revoke %d/%q: %w", uid, device, err)
	}
	return at, nil
}

// RevokedAt returns the latest revocation covering uid's device (zero:
// none).
func (s *Store) RevokedAt(ctx context.Context, uid int64, device string) (time.Time, error) {
	var at *time.Time
	if err := s.Pool.QueryRow(ctx, sqlRevokedAt, uid, device).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("store: revoked at %d/%q: %w", uid, device, err)
	}
	if at == nil {
		return time.Time{}, nil
	}
	return *at, nil
}

// The revocations of the last $1 seconds, by the database's clock: the
// sweep's window is a duration measured on the gateway, so the clocks of
// the gateway and the database need not agree.
const sqlRecentRevocations = `
	SELECT uid, device, revoked_at FROM revocation
	WHERE revoked_at > now() - make_interval(secs => $1)`

// RecentRevocations returns the revocations recorded within the last
// within (served by revocation_by_time).
func (s *Store) RecentRevocations(ctx context.Context, within time.Duration) ([]Revocation, error) {
	rows, err := s.Pool.Query(ctx, sqlRecentRevocations, within.Seconds())
	if err != nil {
		return nil, fmt.Errorf("store: recent revocations: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Revocation, error) {
		var v Revocation
		return v, r.Scan(&v.UID, &v.Device, &v.At)
	})
	if err != nil {
		return nil, fmt.Errorf("store: recent revocations: %w", err)
	}
	return out, nil
}
