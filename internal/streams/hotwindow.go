package streams

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The hot window is how long an inbox entry stays in its INBOX stream:
// older entries are read from the Postgres archive. JetStream does not
// enforce it (an INBOX stream has no MaxAge: an age limit would drop entries
// the archiver has not copied yet); the syncer's trimmer purges what is
// both archived and older (internal/archive). It is recorded on every INBOX
// stream, as the partition counts are, so that every syncer of an
// installation trims by the same window and a syncer started with another
// one refuses to start instead of changing it silently; ChangeHotWindow
// (inboxctl streams set --hot-window) is the documented way to change it.
const (
	// DefaultHotWindow is 30 days.
	DefaultHotWindow = 30 * 24 * time.Hour
	// MinHotWindow keeps the trimmer's rounds (a fraction of the window)
	// and clock steps between the servers far below the window.
	MinHotWindow = time.Second

	metaHotWindow = "inboxd_hot_window"
)

// ValidateHotWindow checks a hot window setting.
func ValidateHotWindow(d time.Duration) error {
	if d < MinHotWindow {
		return fmt.Errorf("streams: hot-window %s is below %s", d, MinHotWindow)
	}
	return nil
}

// HotWindow returns the hot window recorded on an INBOX stream's config:
// its inboxd_hot_window metadata or, on a stream created before the window
// was recorded, its MaxAge (which was the hot window then). ok is false
// when neither is set.
func HotWindow(c jetstream.StreamConfig) (d time.Duration, ok bool, err error) {
	if v, found := c.Metadata[metaHotWindow]; found {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return 0, false, fmt.Errorf("streams: %s metadata %s=%q is not a positive duration", c.Name, metaHotWindow, v)
		}
		return d, true, nil
	}
	if c.MaxAge > 0 {
		return c.MaxAge, true, nil
	}
	return 0, false, nil
}

// SetHotWindow records hot window d on an INBOX stream's config.
func SetHotWindow(c *jetstream.StreamConfig, d time.Duration) {
	c.Metadata = maps.Clone(c.Metadata)
	if c.Metadata == nil {
		c.Metadata = map[string]string{}
	}
	c.Metadata[metaHotWindow] = d.String()
}

// ErrHotWindowMismatch says the hot window an installation records on its
// streams is not the configured one.
var ErrHotWindowMismatch = errors.New("streams: hot window differs from the installation's")

// checkHotWindow refuses an existing INBOX stream that records another hot
// window than want.
func checkHotWindow(c jetstream.StreamConfig, want time.Duration) error {
	have, ok, err := HotWindow(c)
	if err != nil {
		return err
	}
	if ok && have != want {
		return fmt.Errorf("%w: stream %s records --hot-window %s, configured %s: change an installation's hot window with "+
			"`inboxctl streams set --hot-window %s` (docs/operations.md, \"Data lifecycle\"), or start with --hot-window %s",
			ErrHotWindowMismatch, c.Name, have, want, want, have)
	}
	return nil
}

// ChangeHotWindow records hot window d on every INBOX partition of the
// installation (their count is INBOX_0's record) and returns the streams it
// changed; running it again changes nothing. It changes only the record
// (and removes the MaxAge of a stream from before the record): the syncers' trimmers follow it from their next round, and a syncer then
// starts only with --hot-window d. Entries already trimmed under a shorter
// window stay in the archive only; a longer window keeps entries longer
// from now on.
func ChangeHotWindow(ctx context.Context, js jetstream.JetStream, d time.Duration) (changed []string, err error) {
	if err := ValidateHotWindow(d); err != nil {
		return nil, err
	}
	s, err := lookup(ctx, js, InboxStream(0))
	if err != nil {
		return nil, fmt.Errorf("streams: look up %s: %w", InboxStream(0), err)
	}
	n, err := strconv.Atoi(s.CachedInfo().Config.Metadata[metaPartitions])
	if err != nil || n < 1 {
		return nil, fmt.Errorf("streams: %s records no partition count (%s): not an inboxd installation", InboxStream(0), metaPartitions)
	}
	for p := 0; p < n; p++ {
		s, err := lookup(ctx, js, InboxStream(p))
		if err != nil {
			return changed, fmt.Errorf("streams: look up %s: %w", InboxStream(p), err)
		}
		c := s.CachedInfo().Config
		if have, ok, _ := HotWindow(c); ok && have == d && c.Metadata[metaHotWindow] != "" {
			continue
		}
		SetHotWindow(&c, d)
		c.MaxAge = 0 // a stream from before the window was recorded: its MaxAge was the window
		if err := updateWithRetry(ctx, js, c); err != nil {
			return changed, fmt.Errorf("streams: record --hot-window %s on %s: %w", d, c.Name, err)
		}
		changed = append(changed, c.Name)
	}
	return changed, nil
}
