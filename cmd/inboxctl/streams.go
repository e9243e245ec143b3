package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/streams"
)

// streamsSetCmd changes a setting the installation records on its streams:
// the hot window (the documented change; a syncer started with another
// --hot-window than the streams record refuses to start).
func streamsSetCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("streams set", flag.ContinueOnError)
	var c conn
	c.register(fs)
	hot := fs.Duration("hot-window", 0, "record this hot window on every INBOX stream (the syncers' trimmers follow it; start them with the same --hot-window)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *hot == 0 {
		fmt.Fprintln(os.Stderr, "streams set: --hot-window is required")
		return 2
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
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	changed, err := streams.ChangeHotWindow(ctx, js, *hot)
	if err != nil {
		return fail(err)
	}
	if changed == nil {
		changed = []string{}
	}
	emit(struct {
		HotWindow string   `json:"hot_window"`
		Changed   []string `json:"changed"`
	}{hot.String(), changed})
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
