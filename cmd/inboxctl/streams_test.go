package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// The documented change of an installation's hot window: inboxd started
// with another --hot-window than its streams record refuses to start,
// naming the setting and the command; `inboxctl streams set --hot-window`
// records the new one on every INBOX stream (with NATS alone running), and
// inboxd then starts with it, while the old value is refused in turn.
func TestStreamsSetChangesTheHotWindow(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	n := testnode.StartNode(t, cfg, config.RoleAllInOne) // records 720h
	n.Close()

	cfg.HotWindow = 168 * time.Hour
	start := func() (*node.Node, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		return node.Start(ctx, cfg, config.RoleAllInOne, testenv.Logger(t))
	}
	if n, err := start(); err == nil {
		n.Close()
		t.Fatal("inboxd started with --hot-window 168h on an installation that records 720h")
	} else if !strings.Contains(err.Error(), "--hot-window") || !strings.Contains(err.Error(), "inboxctl streams set --hot-window 168h0m0s") {
		t.Fatalf("start with another hot window: %v; want an error naming --hot-window and the command", err)
	}

	natsOnly := testnode.StartNode(t, cfg, config.RoleEmbeddedNATS)
	out, code, _ := runIn(t, context.Background(), "streams", "set", "--hot-window", "168h", "--nats", natsOnly.NATS.ClientURL())
	if code != 0 || len(out) != 1 || out[0]["hot_window"] != "168h0m0s" || len(out[0]["changed"].([]any)) != cfg.Layout.InboxPartitions {
		t.Fatalf("streams set: exit %d, %v", code, out)
	}
	out, code, _ = runIn(t, context.Background(), "streams", "set", "--hot-window", "168h", "--nats", natsOnly.NATS.ClientURL())
	if code != 0 || len(out) != 1 || len(out[0]["changed"].([]any)) != 0 {
		t.Fatalf("streams set again: exit %d, %v (want nothing changed)", code, out)
	}
	natsOnly.Close()

	n, err := start()
	if err != nil {
		t.Fatalf("start with the changed hot window: %v", err)
	}
	defer n.Close()
	js, err := jetstream.New(n.NC)
	if err != nil {
		t.Fatal(err)
	}
	for p := 0; p < cfg.Layout.InboxPartitions; p++ {
		s, err := js.Stream(context.Background(), streams.InboxStream(p))
		if err != nil {
			t.Fatal(err)
		}
		if hw, ok, err := streams.HotWindow(s.CachedInfo().Config); err != nil || !ok || hw != 168*time.Hour {
			t.Fatalf("%s records %s (%v, %v) after the change and a start", streams.InboxStream(p), hw, ok, err)
		}
	}
	n.Close()
	cfg.HotWindow = streams.DefaultHotWindow
	if n, err := start(); err == nil {
		n.Close()
		t.Fatal("inboxd started with the old --hot-window after the change")
	}
}
