package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// runHere runs the inboxctl command args in this process and returns its
// JSON lines and exit code.
func runHere(t *testing.T, args ...string) ([]map[string]any, int) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	out := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		out <- b
	}()
	code := run(context.Background(), args)
	os.Stdout = stdout
	w.Close()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(<-out)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: output line %q is not JSON", args, l)
		}
		lines = append(lines, m)
	}
	return lines, code
}

// inbox is a device of the test: what its handler was handed.
type inbox struct {
	mu  sync.Mutex
	got []string
}

func (b *inbox) handle(m client.Message) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.got = append(b.got, m.Text)
	return nil
}

func (b *inbox) texts() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.got...)
}

// waitText waits until the device was handed text.
func (b *inbox) waitText(t *testing.T, who, text string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, x := range b.texts() {
			if x == text {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not handed %q (has %v)", who, text, b.texts())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stopsRevoked waits for c to stop with ErrRevoked.
func stopsRevoked(t *testing.T, who string, c *client.Client) {
	t.Helper()
	select {
	case <-c.Done():
		if !errors.Is(c.Err(), client.ErrRevoked) {
			t.Fatalf("%s stopped with %v, want ErrRevoked", who, c.Err())
		}
	case <-time.After(5 * time.Second):
		// The gateways' sweep (30 s) would close it too, but only the
		// announcement closes it at once.
		t.Fatalf("%s still connected 5 s after the revocation", who)
	}
}

// inboxctl user revoke --device closes the device's open connection at
// once with REVOKED (the client stops: ErrRevoked), while the user's other
// device stays; the revoked device's old token is refused at its next
// hello, and messages sent meanwhile reach the other device but not the
// revoked one; a token issued after the revocation works. A login with
// the old token does not replace the device's new session. Revoking the
// user (no --device) closes every device.
func TestUserRevoke(t *testing.T) {
	n := testnode.AllInOne(t)
	flags := []string{"--nats", n.NC.ConnectedUrl(), "--secret", testenv.Secret}
	ctx := context.Background()
	conv, err := (&admin.Client{NC: testnode.Admin(t, n)}).CreateConv(ctx, admin.CreateConvRequest{Members: []int64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	url := "tcp://" + n.Gateway.TCPAddr()
	dial := func(tok string, b *inbox) (*client.Client, error) {
		c, err := client.Dial(ctx, client.Options{URL: url, Token: tok, Handler: b.handle,
			MinBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return c, err
	}
	sender, err := client.Dial(ctx, client.Options{URL: url, Token: testenv.Token(t, 1, "s")})
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	send := func(text string) {
		t.Helper()
		if _, err := sender.Send(ctx, conv.ConvID, text, text); err != nil {
			t.Fatal(err)
		}
	}

	phoneTok := testenv.Token(t, 2, "phone")
	var phoneBox, laptopBox inbox
	phone, err := dial(phoneTok, &phoneBox)
	if err != nil {
		t.Fatal(err)
	}
	laptop, err := dial(testenv.Token(t, 2, "laptop"), &laptopBox)
	if err != nil {
		t.Fatal(err)
	}
	send("before")
	phoneBox.waitText(t, "phone", "before")
	laptopBox.waitText(t, "laptop", "before")

	out, code := runHere(t, append([]string{"user", "revoke", "--uid", "2", "--device", "phone"}, flags...)...)
	if code != 0 || len(out) != 1 || out[0]["uid"] != 2.0 || out[0]["device"] != "phone" || out[0]["revoked_at_ms"] == nil {
		t.Fatalf("user revoke: exit %d, %v; want exit 0 and {\"uid\":2,\"device\":\"phone\",\"revoked_at_ms\":T}", code, out)
	}
	revokedAt := time.UnixMilli(int64(out[0]["revoked_at_ms"].(float64)))
	stopsRevoked(t, "the revoked phone", phone)
	select {
	case <-laptop.Done():
		t.Fatalf("revoking the phone stopped the laptop: %v", laptop.Err())
	default:
	}

	send("while revoked")
	laptopBox.waitText(t, "laptop", "while revoked")
	if _, err := dial(phoneTok, &phoneBox); !errors.Is(err, client.ErrRevoked) {
		t.Fatalf("the phone's old token at hello: %v, want ErrRevoked", err)
	}
	time.Sleep(300 * time.Millisecond)
	if got := phoneBox.texts(); len(got) != 1 {
		t.Fatalf("the revoked phone was handed %v, want only the message from before the revocation", got)
	}

	// A token issued after the revocation (iat has a precision of a
	// second: from the next second on) logs the phone in again.
	time.Sleep(time.Until(revokedAt.Truncate(time.Second).Add(time.Second)))
	var newBox inbox
	phone2, err := dial(testenv.Token(t, 2, "phone"), &newBox)
	if err != nil {
		t.Fatalf("a token issued after the revocation: %v", err)
	}
	newBox.waitText(t, "the phone signed in again", "while revoked")
	// The old token is refused before it could replace the new session.
	if _, err := dial(phoneTok, &phoneBox); !errors.Is(err, client.ErrRevoked) {
		t.Fatalf("the old token while the new session runs: %v, want ErrRevoked", err)
	}
	select {
	case <-phone2.Done():
		t.Fatalf("the old token's hello ended the new session: %v", phone2.Err())
	case <-time.After(500 * time.Millisecond):
	}
	send("after")
	newBox.waitText(t, "the new phone session", "after")

	out, code = runHere(t, append([]string{"user", "revoke", "--uid", "2"}, flags...)...)
	if code != 0 || len(out) != 1 || out[0]["uid"] != 2.0 || out[0]["device"] != "" {
		t.Fatalf("user revoke of the user: exit %d, %v", code, out)
	}
	stopsRevoked(t, "the laptop", laptop)
	stopsRevoked(t, "the new phone session", phone2)
	if _, err := sender.Send(ctx, conv.ConvID, "sender still on", "sender still on"); err != nil {
		t.Fatalf("revoking uid 2 affected uid 1: %v", err)
	}

	if _, code := runHere(t, append([]string{"user", "revoke"}, flags...)...); code == 0 {
		t.Fatal("user revoke without --uid exited 0")
	}
}
