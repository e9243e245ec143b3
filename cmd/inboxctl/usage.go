package main

import (
	"context"
	"encoding/json"
	"flag"
	"strconv"
	"time"

	"github.com/inboxd/inboxd/internal/admin"
)

// usageLine is one line of inboxctl usage: v's fields after "kind"
// ("stream", with its sequences and consumers, or "table").
type usageLine struct {
	kind string
	v    any
}

func (l usageLine) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(l.v)
	if err != nil || len(b) < 2 || b[0] != '{' {
		return b, err
	}
	out := append([]byte(`{"kind":`), strconv.Quote(l.kind)...)
	if len(b) > 2 {
		out = append(out, ',')
	}
	return append(out, b[1:]...), nil
}

// usageCmd prints where the disk goes: one JSON line per stream (SEND,
// INBOX_0 …: entries, bytes, the oldest entry's time and first_seq) and one
// per table (entries, bytes with indexes, the oldest entry where the table
// has a time).
func usageCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("usage", flag.ContinueOnError)
	var c conn
	c.register(fs)
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
	u, err := (&admin.Client{NC: nc}).Usage(ctx)
	if err != nil {
		return adminFail(err)
	}
	for i := range u.Streams {
		emit(usageLine{"stream", u.Streams[i]})
	}
	for i := range u.Tables {
		emit(usageLine{"table", u.Tables[i]})
	}
	return 0
}
