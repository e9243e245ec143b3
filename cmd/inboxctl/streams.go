package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"

	"github.com/inboxd/inboxd/internal/streams"
)

// streamsExportCmd writes the concrete definition of every stream and
// consumer, for `nats stream add --config` and `nats consumer add --config`.
func streamsExportCmd(args []string) int {
	fs := flag.NewFlagSet("streams export", flag.ContinueOnError)
	dir := fs.String("dir", "jetstream-export", "output directory")
	l := streams.DefaultLayout
	fs.IntVar(&l.InboxPartitions, "inbox-partitions", l.InboxPartitions, "INBOX partitions")
	fs.IntVar(&l.SendPartitions, "send-partitions", l.SendPartitions, "SEND partitions")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := l.Validate(); err != nil {
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
