package main

import (
	"flag"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"fmt"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/natsconn"
	"os"
	"strconv"
	"strings"

	"github.com/inboxd/inboxd/internal/auth"
)

// conn holds the connection flags every command accepts.
type conn struct {
	nats     string
	natsUser string
	natsPass string
	url      string
	secret   string
}

func (c *conn) register(fs *flag.FlagSet) {
	c.nats = envOr("NATS_URL", "nats://127.0.0.1:4222")
	c.url = envOr("INBOXD_URL", "ws://127.0.0.1:7070/ws")
	c.secret = envOr("INBOXD_TOKEN_SECRET", auth.DevSecret)
	fs.StringVar(&c.nats, "nats", c.nats, "NATS URL of the admin API (env NATS_URL)")
	c.natsUser = envOr("NATS_USER", string(natsauth.Admin))
	fs.StringVar(&c.natsUser, "nats-user", c.natsUser, "NATS user (env NATS_USER)")
	fs.StringVar(&c.natsPass, "nats-password", os.Getenv("NATS_PASSWORD"), "NATS password (env NATS_PASSWORD; default $INBOXD_NATS_PASSWORD_ADMIN or the development password)")
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

// connectNATS connects to the admin API's NATS server as the admin user.
func (c *conn) connectNATS() (*nats.Conn, error) {
	pw := c.natsPass
	if pw == "" {
		pw = natsauth.Password(natsauth.Role(c.natsUser))
	}
	return natsconn.Connect(c.nats, "inboxctl", zap.NewNop(), nats.UserInfo(c.natsUser, pw))
}
