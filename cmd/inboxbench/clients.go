package main

// How the worker operations connect: client connections to the gateway
// (tokens, the worker's source address, retries) and, for the baselines,
// NATS connections.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/wire"
)

// target says where and how clients connect.
type target struct {
	URL    string `json:"url"`
	Secret string `json:"secret"`
	Kind   string `json:"kind,omitempty"`
}

// natsTarget says where the baselines connect to NATS.
type natsTarget struct {
	NATS string `json:"nats"`
	User string `json:"user"`
	Pass string `json:"pass"`
}

func (t natsTarget) connect() (*nats.Conn, error) {
	return nats.Connect(t.NATS, nats.UserInfo(t.User, t.Pass))
}

// options are the client options of device (uid, device) dialling from the
// worker's source address.
func (w *worker) options(t target, uid int64, device string) (client.Options, error) {
	tok, err := auth.NewSigner(t.Secret).Issue(uid, device, 24*time.Hour)
	if err != nil {
		return client.Options{}, err
	}
	o := client.Options{URL: t.URL, Token: tok, DeviceKind: t.Kind, DialTimeout: 30 * time.Second,
		MaxBackoff: 2 * time.Second}
	if w.local != nil {
		o.LocalAddr = w.local
	}
	return o, nil
}

// dial connects device (uid, device), trying up to attempts times.
func (w *worker) dial(t target, uid int64, device string, attempts int) (*client.Client, error) {
	o, err := w.options(t, uid, device)
	if err != nil {
		return nil, err
	}
	c, _, err := dialRetry(context.Background(), o, attempts)
	return c, err
}

// maxRefusals is how many times a dial comes back after a hello the
// gateway refused with retry_after_ms (its login budget, docs/protocol.md
// "Login admission") before it gives up; these do not count against its
// attempts.
const maxRefusals = 50

// dialRetry dials until it succeeds, attempts (or maxRefusals refusals
// with a retry hint) are used up or ctx ends. A refused hello with
// retry_after_ms is dialled again after the hint, as the client package
// does on its reconnects; any other failure after a short backoff. It
// returns the retries it made.
func dialRetry(ctx context.Context, o client.Options, attempts int) (*client.Client, int, error) {
	var err error
	retries, failures, refusals := 0, 0, 0
	for {
		var c *client.Client
		if c, err = client.Dial(ctx, o); err == nil {
			return c, retries, nil
		}
		if ctx.Err() != nil {
			break
		}
		hint := retryHint(err)
		if hint > 0 && refusals < maxRefusals {
			refusals++
		} else if failures++; failures >= max(attempts, 1) {
			break
		}
		wait := hint
		if wait <= 0 {
			wait = time.Duration(50*failures) * time.Millisecond
		}
		retries++
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil, retries, err
}

// retryHint is the retry_after_ms of a refused hello (0: none).
func retryHint(err error) time.Duration {
	var we *wire.Error
	if errors.As(err, &we) {
		return time.Duration(we.RetryAfterMs) * time.Millisecond
	}
	return 0
}

// closeAll closes the clients (nil ones skipped), 512 at a time.
func closeAll(cs []*client.Client) {
	sem := make(chan struct{}, 512)
	var wg sync.WaitGroup
	for _, c := range cs {
		if c == nil {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Close()
			<-sem
		}()
	}
	wg.Wait()
}
