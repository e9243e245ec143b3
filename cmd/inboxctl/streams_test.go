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

// The documented R1 -> R3 scale-up of an installation, on a real 3-node
// NATS cluster: inboxd (without its embedded server) creates R1 streams;
// a restart with --replicas 3 is refused naming the setting and the
// command; `inboxctl streams set --replicas 3` rescales every stream;
// inboxd then starts with --replicas 3 (and is refused with 1), and the
// command scales back to R1 as well.
func TestStreamsSetScalesReplicas(t *testing.T) {
	c := testenv.StartCluster(t, testnode.Layout().InboxPartitions)
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.NATSURL = c.URLs()
	roles := config.RoleAllInOne &^ config.RoleEmbeddedNATS
	start := func(replicas int) (*node.Node, error) {
		cfg.Replicas = replicas
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		return node.Start(ctx, cfg, roles, testenv.Logger(t))
	}
	n, err := start(1)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	if n, err := start(3); err == nil {
		n.Close()
		t.Fatal("inboxd started with --replicas 3 on R1 streams")
	} else if !strings.Contains(err.Error(), "--replicas 3") || !strings.Contains(err.Error(), "inboxctl streams set --replicas 3") {
		t.Fatalf("start with --replicas 3 on R1 streams: %v; want an error naming --replicas and the command", err)
	}

	all := 1 + cfg.Layout.InboxPartitions
	out, code, _ := runIn(t, context.Background(), "streams", "set", "--replicas", "3", "--nats", c.URLs())
	if code != 0 || len(out) != 1 || out[0]["replicas"] != float64(3) || len(out[0]["changed"].([]any)) != all {
		t.Fatalf("streams set --replicas 3: exit %d, %v", code, out)
	}
	out, code, _ = runIn(t, context.Background(), "streams", "set", "--replicas", "3", "--nats", c.URLs())
	if code != 0 || len(out) != 1 || len(out[0]["changed"].([]any)) != 0 {
		t.Fatalf("streams set --replicas 3 again: exit %d, %v (want nothing changed)", code, out)
	}
	if _, code, _ := runIn(t, context.Background(), "streams", "set", "--replicas", "2", "--nats", c.URLs()); code == 0 {
		t.Fatal("streams set --replicas 2 succeeded")
	}

	n, err = start(3)
	if err != nil {
		t.Fatalf("start with --replicas 3 after the change: %v", err)
	}
	js, err := jetstream.New(n.NC)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{streams.SendStream, streams.InboxStream(0), streams.InboxStream(cfg.Layout.InboxPartitions - 1)} {
		s, err := js.Stream(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if r := s.CachedInfo().Config.Replicas; r != 3 {
			t.Fatalf("%s has %d replicas after the change", name, r)
		}
	}
	n.Close()
	if n, err := start(1); err == nil {
		n.Close()
		t.Fatal("inboxd started with --replicas 1 on R3 streams")
	}

	out, code, _ = runIn(t, context.Background(), "streams", "set", "--replicas", "1", "--nats", c.URLs())
	if code != 0 || len(out) != 1 || len(out[0]["changed"].([]any)) != all {
		t.Fatalf("streams set --replicas 1: exit %d, %v", code, out)
	}
	n, err = start(1)
	if err != nil {
		t.Fatalf("start with --replicas 1 after scaling back: %v", err)
	}
	n.Close()
}
