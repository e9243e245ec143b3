package main

// How the worker operations connect: client connections to the gateway
// (tokens, the worker's source address, retries) and, for the baselines,
// NATS connections.

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/auth"
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

// dialRetry dials until it succeeds, attempts are used up or ctx ends.
func dialRetry(ctx context.Context, o client.Options, attempts int) (*client.Client, int, error) {
	var err error
	for i := 0; i < max(attempts, 1); i++ {
		var c *client.Client
		if c, err = client.Dial(ctx, o); err == nil {
			return c, i, nil
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(50*(i+1)) * time.Millisecond):
		}
	}
	return nil, attempts, err
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
