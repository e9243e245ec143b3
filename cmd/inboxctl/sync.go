package main

import (
	"context"
	"errors"
	"flag"
	"sync"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/auth"
)

type syncLine struct {
	Seq       uint64 `json:"seq"`
	MsgID     int64  `json:"msg_id"`
	ConvID    int64  `json:"conv_id"`
	ConvSeq   int64  `json:"conv_seq"`
	SenderUID int64  `json:"sender_uid"`
	Text      string `json:"text"`
	Lane      string `json:"lane"`
}

// syncCmd prints the device's messages as the client package hands them to
// an application (deduplicated, in conv_seq order per conversation) and
// confirms what it printed.
func syncCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("sync", flag.ContinueOnError)
	var c conn
	c.register(fs)
	uid := fs.Int64("uid", 0, "uid")
	device := fs.String("device", "", "device id")
	idle := fs.Duration("idle", 2*time.Second, "exit after this long with nothing new")
	maxN := fs.Int("max", 0, "exit after this many messages, confirming only those (0: no limit)")
	noAck := fs.Bool("no-ack", false, "print and confirm nothing, like a client that crashes before storing")
	kind := fs.String("kind", "desktop", "device kind: mobile, desktop or web")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *uid <= 0 || *device == "" {
		return fail(errors.New("sync needs --uid and --device"))
	}
	tok, err := auth.NewSigner(c.secret).Issue(*uid, *device, time.Hour)
	if err != nil {
		return fail(err)
	}
	var (
		mu      sync.Mutex
		printed int
		last    = time.Now()
		full    = make(chan struct{})
	)
	handler := func(m client.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if *maxN > 0 && printed >= *maxN {
			return client.ErrStop // not printed, not confirmed
		}
		emit(syncLine{Seq: m.Seq, MsgID: m.MsgID, ConvID: m.ConvID, ConvSeq: m.ConvSeq, SenderUID: m.SenderUID, Text: m.Text, Lane: m.Lane})
		printed++
		last = time.Now()
		if *maxN > 0 && printed == *maxN {
			close(full)
		}
		return nil
	}
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	cl, err := client.Dial(dctx, client.Options{URL: c.url, Token: tok, DeviceKind: *kind, Handler: handler, NoAck: *noAck})
	cancel()
	if err != nil {
		return clientFail("", err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
		case <-full:
		case <-tick.C:
			mu.Lock()
			quiet := time.Since(last) >= *idle
			mu.Unlock()
			if !quiet {
				continue
			}
		}
		break
	}
	cl.Close() // confirms what was printed (unless --no-ack)
	return 0
}
