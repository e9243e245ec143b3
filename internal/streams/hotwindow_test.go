package streams_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
)

func testJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	_, js := testenv.JetStream(t)
	return js
}

func recordedWindows(t *testing.T, js jetstream.JetStream, l streams.Layout) []time.Duration {
	t.Helper()
	var out []time.Duration
	for p := 0; p < l.InboxPartitions; p++ {
		s, err := js.Stream(context.Background(), streams.InboxStream(p))
		if err != nil {
			t.Fatal(err)
		}
		c := s.CachedInfo().Config
		hw, ok, err := streams.HotWindow(c)
		if err != nil || !ok {
			t.Fatalf("%s: hot window %v, %v", c.Name, ok, err)
		}
		if c.MaxAge != 0 {
			t.Fatalf("%s has MaxAge %s: JetStream would drop unarchived entries", c.Name, c.MaxAge)
		}
		out = append(out, hw)
	}
	return out
}

// A start with another --hot-window than the installation records is an
// error naming the setting and the way to change it, and changes nothing;
// after ChangeHotWindow (inboxctl streams set) every partition records the
// new window and a start with it succeeds.
func TestHotWindowMismatchRefusedUntilChanged(t *testing.T) {
	js := testJS(t)
	ctx := context.Background()
	l := streams.Layout{InboxPartitions: 3, SendPartitions: 2}
	if err := streams.EnsureStreams(ctx, js, l, 720*time.Hour, streams.DefaultReplicas); err != nil {
		t.Fatal(err)
	}
	err := streams.EnsureStreams(ctx, js, l, 168*time.Hour, streams.DefaultReplicas)
	if !errors.Is(err, streams.ErrHotWindowMismatch) || !strings.Contains(err.Error(), "--hot-window") ||
		!strings.Contains(err.Error(), "720h0m0s") || !strings.Contains(err.Error(), "inboxctl streams set --hot-window 168h0m0s") {
		t.Fatalf("start with another hot window: %v", err)
	}
	for p, hw := range recordedWindows(t, js, l) {
		if hw != 720*time.Hour {
			t.Fatalf("INBOX_%d records %s after a refused start", p, hw)
		}
	}

	changed, err := streams.ChangeHotWindow(ctx, js, 168*time.Hour)
	if err != nil || len(changed) != 3 {
		t.Fatalf("change: %v, %v", changed, err)
	}
	if again, err := streams.ChangeHotWindow(ctx, js, 168*time.Hour); err != nil || len(again) != 0 {
		t.Fatalf("change again: %v, %v (want nothing changed)", again, err)
	}
	for p, hw := range recordedWindows(t, js, l) {
		if hw != 168*time.Hour {
			t.Fatalf("INBOX_%d records %s after the change", p, hw)
		}
	}
	if err := streams.EnsureStreams(ctx, js, l, 168*time.Hour, streams.DefaultReplicas); err != nil {
		t.Fatalf("start with the changed window: %v", err)
	}
	if err := streams.EnsureStreams(ctx, js, l, 720*time.Hour, streams.DefaultReplicas); !errors.Is(err, streams.ErrHotWindowMismatch) {
		t.Fatalf("start with the old window after the change: %v", err)
	}
	if _, err := streams.ChangeHotWindow(ctx, js, 0); err == nil {
		t.Fatal("a zero hot window accepted")
	}
}

// legacyInstallation creates INBOX streams as jetstream/streams/INBOX.json
// defined them before the hot window was recorded: a 30-day MaxAge,
// discard old, no record.
func legacyInstallation(t *testing.T, l streams.Layout) jetstream.JetStream {
	t.Helper()
	js := testJS(t)
	for p := 0; p < l.InboxPartitions; p++ {
		c, err := streams.InboxStreamConfig(l, p)
		if err != nil {
			t.Fatal(err)
		}
		c.MaxAge, c.Discard = 30*24*time.Hour, jetstream.DiscardOld
		if _, err := js.CreateStream(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	return js
}

// An installation from before the hot window was recorded has INBOX
// streams with a 30-day MaxAge and no record: that MaxAge is its hot
// window. A start with the default (720h, the same) takes the MaxAge off
// and records the window; a start with another window is refused like any
// mismatch, and ChangeHotWindow changes it (and takes the MaxAge off too).
func TestStreamsWithMaxAgeMigrateToTheRecordedHotWindow(t *testing.T) {
	ctx := context.Background()
	l := streams.Layout{InboxPartitions: 2, SendPartitions: 2}

	js := legacyInstallation(t, l)
	if err := streams.EnsureStreams(ctx, js, l, streams.DefaultHotWindow, streams.DefaultReplicas); err != nil {
		t.Fatal(err)
	}
	for p, hw := range recordedWindows(t, js, l) {
		if hw != streams.DefaultHotWindow {
			t.Fatalf("default start: INBOX_%d records %s", p, hw)
		}
	}

	js = legacyInstallation(t, l)
	err := streams.EnsureStreams(ctx, js, l, 168*time.Hour, streams.DefaultReplicas)
	if !errors.Is(err, streams.ErrHotWindowMismatch) || !strings.Contains(err.Error(), "720h0m0s") {
		t.Fatalf("start of a 30-day installation with 168h: %v", err)
	}
	if _, err := streams.ChangeHotWindow(ctx, js, 168*time.Hour); err != nil {
		t.Fatal(err)
	}
	for p, hw := range recordedWindows(t, js, l) {
		if hw != 168*time.Hour {
			t.Fatalf("changed: INBOX_%d records %s", p, hw)
		}
	}
	if err := streams.EnsureStreams(ctx, js, l, 168*time.Hour, streams.DefaultReplicas); err != nil {
		t.Fatal(err)
	}
}
