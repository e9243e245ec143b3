package retention

import (
	"testing"
	"time"
)

// The job's defaults: monthly ranges reach two months ahead and the job
// runs every 10 minutes; short widths run a quarter of a width apart (at
// least 100 ms) and reach two widths ahead, at least 30 s.
func TestOptionsDefaults(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		opts  Options
		every time.Duration
		until time.Time
	}{
		{Options{}, 10 * time.Minute, time.Date(2027, 2, 2, 10, 0, 0, 0, time.UTC)},
		{Options{Width: 24 * time.Hour}, 10 * time.Minute, now.Add(48 * time.Hour)},
		{Options{Width: time.Minute}, 15 * time.Second, now.Add(2 * time.Minute)},
		{Options{Width: time.Second}, 250 * time.Millisecond, now.Add(30 * time.Second)},
		{Options{Width: time.Second, Ahead: time.Hour, Every: time.Second}, time.Second, now.Add(time.Hour)},
	} {
		o := tc.opts
		o.defaults()
		if o.Every != tc.every || !o.until(now).Equal(tc.until) || o.Batch != 5000 {
			t.Errorf("%+v: every %s, until %s, batch %d; want %s, %s", tc.opts, o.Every, o.until(now), o.Batch, tc.every, tc.until)
		}
	}
}
