// Package natsconn opens the NATS connections of inboxd services with the
// reconnect behaviour they all need: reconnect forever, buffer while
// disconnected, log state changes (never a password or token of a URL).
package natsconn

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.uber.org/zap"
)

// Connect connects to url (one or more, comma separated) as name (shown by
// `nats server report connections`).
func Connect(url, name string, log *zap.Logger, extra ...nats.Option) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.RetryOnFailedConnect(false),
		nats.ReconnectBufSize(64 << 20),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return // a deliberate close
			}
			log.Warn("nats disconnected", zap.String("conn", name), zap.Error(err))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("nats reconnected", zap.String("conn", name), zap.String("url", Redact(nc.ConnectedUrl())))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			log.Warn("nats async error", zap.String("conn", name), zap.String("subject", subj), zap.Error(err))
		}),
	}
	nc, err := nats.Connect(url, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("nats connect %s: %w", Redact(url), err)
	}
	return nc, nil
}

// Redact returns NATS server URLs (comma separated, as nats.Connect takes
// them) fit for a log line: a password is replaced by xxxxx, and so is a
// user without a password, which NATS takes for a token
// (nats://TOKEN@host). nats.Conn.ConnectedUrlRedacted hides only the
// password form.
func Redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, raw := range parts {
		s := strings.TrimSpace(raw)
		if !strings.Contains(s, "@") {
			continue
		}
		u, err := url.Parse(s)
		if err != nil || u.User == nil {
			// Unparseable: keep only what follows the last '@' (the host).
			parts[i] = "xxxxx@" + s[strings.LastIndex(s, "@")+1:]
			continue
		}
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		} else {
			u.User = url.User("xxxxx")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// Unanswered reports whether err is NATS not answering a request: a
// timeout or no responders. It is what a JetStream cluster electing a
// leader, a node catching up after a restart, or the dead server of an R1
// consumer looks like from the client: worth waiting out or treating as
// "that server is down", never a configuration error.
func Unanswered(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders)
}
