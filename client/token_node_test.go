package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// A client whose tokens live 3 s (2–3 s: iat and exp have a precision of a
// second) keeps its one session across several expiries by refreshing
// through RefreshToken, against a real gateway that closes a connection at
// its token's exp: no reconnect, no error, and every message sent
// meanwhile is handed to the application once, in conv_seq order.
func TestRefreshTokenKeepsSessionAcrossExpiries(t *testing.T) {
	n := testnode.AllInOne(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conv, err := (&admin.Client{NC: testnode.Admin(t, n)}).CreateConv(ctx, admin.CreateConvRequest{Members: []int64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	signer := auth.NewSigner(testenv.Secret)
	short := func() (string, error) { return signer.Issue(2, "phone", 3*time.Second) }
	var (
		mu        sync.Mutex
		refreshes int
		errs      []error
		got       []client.Message
	)
	first, err := short()
	if err != nil {
		t.Fatal(err)
	}
	url := "tcp://" + n.Gateway.TCPAddr()
	rc, err := client.Dial(ctx, client.Options{URL: url, Token: first,
		RefreshToken: func(context.Context) (string, error) {
			mu.Lock()
			refreshes++
			mu.Unlock()
			return short()
		},
		OnError: func(err error) {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		},
		Handler: func(m client.Message) error {
			mu.Lock()
			got = append(got, m)
			mu.Unlock()
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	welcome := rc.Welcome()
	firstExp := time.UnixMilli(welcome.GetTokenExpiresAtMs())

	sender, err := client.Dial(ctx, client.Options{URL: url, Token: testenv.Token(t, 1, "s")})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	// Three token lifetimes past the first exp, a message every 100 ms.
	sent := 0
	for end := firstExp.Add(7 * time.Second); time.Now().Before(end); sent++ {
		if _, err := sender.Send(ctx, conv.ConvID, fmt.Sprint("m", sent), fmt.Sprint("message ", sent)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		k := len(got)
		mu.Unlock()
		if k >= sent || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // nothing more comes
	mu.Lock()
	defer mu.Unlock()
	if len(got) != sent {
		t.Fatalf("the application was handed %d messages, %d were sent", len(got), sent)
	}
	for i, m := range got {
		if m.ConvSeq != int64(i+1) || m.Text != fmt.Sprint("message ", i) {
			t.Fatalf("message %d is conv_seq %d %q: want every message once, in order", i, m.ConvSeq, m.Text)
		}
	}
	if refreshes < 3 {
		t.Fatalf("%d refreshes over three token lifetimes, want at least 3", refreshes)
	}
	if len(errs) > 0 {
		t.Fatalf("the client reported %v, want nothing (no expiry, no reconnect)", errs)
	}
	if rc.Welcome() != welcome {
		t.Fatal("the client logged in again: the session did not survive the token's expiry")
	}
}
