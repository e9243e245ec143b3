package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"strconv"
	"time"

	"github.com/inboxd/inboxd/internal/admin"
)

type traceLine struct {
	MsgID    int64     `json:"msg_id"`
	UID      int64     `json:"uid"`
	Device   string    `json:"device"`
	Status   string    `json:"status"`
	Seq      uint64    `json:"seq"`
	Cursor   uint64    `json:"cursor"`
	ReadSeq  int64     `json:"read_seq"`
	ConvSeq  int64     `json:"conv_seq"`
	StoredAt time.Time `json:"stored_at"`
}

// traceCmd prints a message's status per recipient and device, derived
// from the state that exists anyway (content row, inbox entry, device
// cursors, read positions). A recipient with no device prints one line with
// an empty device.
func traceCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	var c conn
	c.register(fs)
	human := fs.Bool("human", false, "print a readable table instead of JSON lines")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 1 {
		return fail(errors.New("usage: inboxctl trace MSG_ID"))
	}
	arg := fs.Arg(0)
	if err := fs.Parse(fs.Args()[1:]); err != nil || fs.NArg() != 0 { // flags may follow MSG_ID
		return fail(errors.New("usage: inboxctl trace MSG_ID [flags]"))
	}
	msgID, err := strconv.ParseInt(arg, 10, 64)
	if err != nil {
		return fail(errors.New("MSG_ID must be an integer"))
	}
	nc, err := c.connectNATS()
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	t, err := (&admin.Client{NC: nc}).Trace(ctx, msgID)
	if err != nil {
		return adminFail(err)
	}
	var lines []traceLine
	for _, r := range t.Recipients {
		line := traceLine{MsgID: t.MsgID, UID: r.UID, Status: r.Status, Seq: r.Seq, ReadSeq: r.ReadSeq, ConvSeq: t.ConvSeq, StoredAt: t.StoredAt}
		if len(r.Devices) == 0 {
			lines = append(lines, line)
		}
		for _, d := range r.Devices {
			line.Device, line.Status, line.Cursor = d.Device, d.Status, d.Cursor
			lines = append(lines, line)
		}
	}
	if *human {
		humanTrace(os.Stdout, lines)
		return 0
	}
	for _, l := range lines {
		emit(l)
	}
	return 0
}

// auditCmd lists messages older than --older-than whose recipients'
// devices were connected since and still did not confirm them.
func auditCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("audit", flag.ContinueOnError)
	var c conn
	c.register(fs)
	older := fs.Duration("older-than", 10*time.Minute, "only messages stored longer ago than this")
	limit := fs.Int("limit", 1000, "at most this many lines")
	human := fs.Bool("human", false, "print a readable table instead of JSON lines")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	nc, err := c.connectNATS()
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	r, err := (&admin.Client{NC: nc}).Audit(ctx, admin.AuditRequest{OlderThanMs: older.Milliseconds(), Limit: *limit})
	if err != nil {
		return adminFail(err)
	}
	if *human {
		humanAudit(os.Stdout, r.Stuck)
		return 0
	}
	for _, s := range r.Stuck {
		emit(s)
	}
	return 0
}
