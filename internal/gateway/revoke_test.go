package gateway

import (
	"testing"
	"time"
)

// revokes compares in whole seconds (iat is a JWT NumericDate): a token of
// the revocation's own second counts as issued before it; one without iat
// is covered by any revocation; no revocation covers nothing.
func TestRevokesWholeSeconds(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 400e6, time.UTC) // 10:00:00.4
	for _, tc := range []struct {
		name      string
		revokedAt time.Time
		iat       time.Time
		want      bool
	}{
		{"no revocation", time.Time{}, at, false},
		{"issued a second before", at, at.Truncate(time.Second).Add(-time.Second), true},
		{"issued in the revocation's second", at, at.Truncate(time.Second), true},
		{"issued the next second", at, at.Truncate(time.Second).Add(time.Second), false},
		{"revoked on the second, issued in it", at.Truncate(time.Second), at.Truncate(time.Second), true},
		{"no iat", at, time.Time{}, true},
	} {
		if got := revokes(tc.revokedAt, tc.iat); got != tc.want {
			t.Errorf("%s: revokes(%s, %s) = %v, want %v", tc.name, tc.revokedAt, tc.iat, got, tc.want)
		}
	}
}
