package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/inboxd/inboxd/internal/auth"
)

// conn holds the connection flags every command accepts.
type conn struct {
	nats   string
	url    string
	secret string
}

func (c *conn) register(fs *flag.FlagSet) {
	c.nats = envOr("NATS_URL", "nats://127.0.0.1:4222")
	c.url = envOr("INBOXD_URL", "ws://127.0.0.1:7070/ws")
	c.secret = envOr("INBOXD_TOKEN_SECRET", auth.DevSecret)
	fs.StringVar(&c.nats, "nats", c.nats, "NATS URL of the admin API (env NATS_URL)")
	fs.StringVar(&c.url, "url", c.url, "gateway URL: ws://host:port/ws or tcp://host:port (env INBOXD_URL)")
	fs.StringVar(&c.secret, "secret", c.secret, "token signing secret (env INBOXD_TOKEN_SECRET)")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// int64List is a flag of comma-separated integers.
type int64List []int64

func (l *int64List) String() string {
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.FormatInt(v, 10)
	}
	return strings.Join(s, ",")
}

func (l *int64List) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not an integer", f)
		}
		*l = append(*l, n)
	}
	return nil
}
