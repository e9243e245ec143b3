package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/natsconn"
)

// conn holds the connection flags every command accepts.
type conn struct {
	nats     string
	natsUser string
	natsPass string
	creds    string // a NATS credentials file: replaces user and password
	ca       string // the CA that verifies the NATS server (TLS)
	url      string
	secret   string
}

// register adds the connection flags to fs. Their defaults are the static
// ones, and the environment variables are applied to the values after
// registering, so a flag still beats its variable while -h and a flag
// error (fs.Usage: config.Usage, which hides secret defaults) print no
// value from the environment.
func (c *conn) register(fs *flag.FlagSet) {
	fs.StringVar(&c.nats, "nats", "nats://127.0.0.1:4222", "NATS URL of the admin API (env NATS_URL)")
	fs.StringVar(&c.natsUser, "nats-user", string(natsauth.Admin), "NATS user (env NATS_USER)")
	fs.StringVar(&c.natsPass, "nats-password", "", "NATS password (env NATS_PASSWORD; default $INBOXD_NATS_PASSWORD_ADMIN or the development password)")
	fs.StringVar(&c.creds, "nats-creds", "", "NATS credentials file (JWT and nkey seed) instead of user and password (env INBOXD_NATS_CREDS)")
	fs.StringVar(&c.ca, "nats-ca", "", "PEM CA that verifies the NATS server's TLS certificate (env INBOXD_NATS_CA)")
	fs.StringVar(&c.url, "url", "ws://127.0.0.1:7070/ws", "gateway URL: ws://host:port/ws or tcp://host:port (env INBOXD_URL)")
	fs.StringVar(&c.secret, "secret", auth.DevSecret, "token signing secret (env INBOXD_TOKEN_SECRET; default the development secret)")
	fromEnv(&c.nats, "NATS_URL")
	fromEnv(&c.natsUser, "NATS_USER")
	fromEnv(&c.natsPass, "NATS_PASSWORD")
	fromEnv(&c.creds, "INBOXD_NATS_CREDS")
	fromEnv(&c.ca, "INBOXD_NATS_CA")
	fromEnv(&c.url, "INBOXD_URL")
	fromEnv(&c.secret, "INBOXD_TOKEN_SECRET")
	fs.Usage = config.Usage(fs, nil)
}

// fromEnv sets *dst to environment variable name if that is set.
func fromEnv(dst *string, name string) {
	if v := os.Getenv(name); v != "" {
		*dst = v
	}
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
// With --nats-creds the credentials file is the login; with --nats-ca the
// server is verified by that CA, as the services do (internal/node).
func (c *conn) connectNATS() (*nats.Conn, error) {
	var opts []nats.Option
	if c.creds != "" {
		if _, err := os.Stat(c.creds); err != nil {
			return nil, fmt.Errorf("--nats-creds: %w", err)
		}
		opts = append(opts, nats.UserCredentials(c.creds))
	} else {
		pw := c.natsPass
		if pw == "" {
			pw = natsauth.Password(natsauth.Role(c.natsUser))
		}
		opts = append(opts, nats.UserInfo(c.natsUser, pw))
	}
	if c.ca != "" {
		if _, err := os.Stat(c.ca); err != nil {
			return nil, fmt.Errorf("--nats-ca: %w", err)
		}
		opts = append(opts, nats.RootCAs(c.ca))
	}
	return natsconn.Connect(c.nats, "inboxctl", zap.NewNop(), opts...)
}
