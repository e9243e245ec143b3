package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/streams"
)

// streamsSetCmd changes a setting the installation records on its streams:
// the hot window and the replica count (the documented changes; a syncer
// started with another --hot-window or --replicas than the streams have
// refuses to start). Either or both in one call.
func streamsSetCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("streams set", flag.ContinueOnError)
	var c conn
	c.register(fs)
	hot := fs.Duration("hot-window", 0, "record this hot window on every INBOX stream (the syncers' trimmers follow it; start them with the same --hot-window)")
	replicas := fs.Int("replicas", 0, "scale SEND and every INBOX stream to this many replicas: 1, 3 or 5 (a NATS cluster of at least that many servers; start the syncers with the same --replicas)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *hot == 0 && *replicas == 0 {
		fmt.Fprintln(os.Stderr, "streams set: --hot-window or --replicas is required")
		return 2
	}
	if *replicas != 0 {
		if err := streams.ValidateReplicas(*replicas); err != nil {
			return fail(fmt.Errorf("--replicas: %w", err))
		}
	}
	nc, err := c.connectNATS()
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	// A rescale moves every stream's data to new peers: give it time.
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out := struct {
		HotWindow string   `json:"hot_window,omitempty"`
		Replicas  int      `json:"replicas,omitempty"`
		Changed   []string `json:"changed"`
	}{Changed: []string{}}
	if *hot != 0 {
		changed, err := streams.ChangeHotWindow(ctx, js, *hot)
		if err != nil {
			return fail(err)
		}
		out.HotWindow = hot.String()
		out.Changed = append(out.Changed, changed...)
	}
	if *replicas != 0 {
		changed, err := streams.ChangeReplicas(ctx, js, *replicas)
		if err != nil {
			return fail(err)
		}
		out.Replicas = *replicas
		for _, n := range changed {
			if !slices.Contains(out.Changed, n) {
				out.Changed = append(out.Changed, n)
			}
		}
	}
	emit(out)
	return 0
}

// streamsExportCmd writes the concrete definition of every stream and
// consumer, for `nats stream add --config` and `nats consumer add --config`.
func streamsExportCmd(args []string) int {
	fs := flag.NewFlagSet("streams export", flag.ContinueOnError)
	dir := fs.String("dir", "jetstream-export", "output directory")
	l := streams.DefaultLayout
	fs.IntVar(&l.InboxPartitions, "inbox-partitions", l.InboxPartitions, "INBOX partitions")
	fs.IntVar(&l.SendPartitions, "send-partitions", l.SendPartitions, "SEND partitions")
	hot := fs.Duration("hot-window", streams.DefaultHotWindow, "hot window recorded on the INBOX streams")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := l.Validate(); err != nil {
		return fail(err)
	}
	if err := streams.ValidateHotWindow(*hot); err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return fail(err)
	}
	write := func(name string, v any) error {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(*dir, name), append(b, '\n'), 0o644)
	}
	send, err := streams.SendStreamConfig()
	if err != nil {
		return fail(err)
	}
	if err := write("SEND.json", send); err != nil {
		return fail(err)
	}
	var files []string
	for p := 0; p < l.InboxPartitions; p++ {
		c, err := streams.InboxStreamConfig(l, p)
		if err != nil {
			return fail(err)
		}
		streams.SetHotWindow(&c, *hot)
		name := c.Name + ".json"
		if err := write(name, c); err != nil {
			return fail(err)
		}
		files = append(files, name)
	}
	for p := 0; p < l.SendPartitions; p++ {
		c, err := streams.FanoutConsumerConfig(p)
		if err != nil {
			return fail(err)
		}
		name := "SEND." + c.Durable + ".json"
		if err := write(name, c); err != nil {
			return fail(err)
		}
		files = append(files, name)
	}
	emit(struct {
		Dir   string   `json:"dir"`
		Files []string `json:"files"`
	}{*dir, append([]string{"SEND.json"}, files...)})
	return 0
}
