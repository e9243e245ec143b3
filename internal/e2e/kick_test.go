package e2e

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// Of two logins of one device, the one that began later wins: a login
// announcement (kick) from an older login — a hello its client gave up on,
// registering on another gateway after the client's retry — must not
// replace the newer session (the client stops for good on
// SESSION_REPLACED); the newer session announces itself again so that the
// older one closes. A kick from a newer login replaces it, and so does a
// kick without a time (a gateway of the previous version).
func TestOlderLoginDoesNotReplaceNewer(t *testing.T) {
	n := testnode.AllInOne(t)
	nc := testnode.Admin(t, n)
	const uid = 7
	p := ids.Partition(uid, testnode.Layout().InboxPartitions)
	subject := streams.UserKick(p, uid)
	consumer := streams.DeviceConsumer(uid, "laptop")

	dial := func() *client.Client {
		c, err := client.Dial(ctxT(t, 20*time.Second), client.Options{URL: n.Gateway.WSURL(), Token: testenv.Token(t, uid, "laptop"),
			Handler: func(client.Message) error { return nil }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	kicks, err := nc.SubscribeSync(subject)
	if err != nil {
		t.Fatal(err)
	}
	c := dial()
	own, err := kicks.NextMsg(5 * time.Second) // its own announcement
	if err != nil {
		t.Fatalf("no login announcement: %v", err)
	}
	f := strings.Fields(string(own.Data))
	if len(f) != 3 || f[0] != consumer {
		t.Fatalf("announcement %q: want %q <session> <born>", own.Data, consumer)
	}
	born, _ := strconv.ParseInt(f[2], 10, 64)

	// An older login's late announcement.
	if err := nc.Publish(subject, []byte(consumer+" older-session "+strconv.FormatInt(born-int64(time.Second), 10))); err != nil {
		t.Fatal(err)
	}
	again, err := kicks.NextMsg(5 * time.Second)
	for err == nil && strings.Contains(string(again.Data), "older-session") {
		again, err = kicks.NextMsg(5 * time.Second)
	}
	if err != nil || string(again.Data) != string(own.Data) {
		t.Fatalf("after an older login's kick: announcement %v %v, want the session's own again (%q)", again, err, own.Data)
	}
	select {
	case <-c.Done():
		t.Fatalf("the newer session was replaced by an older login's kick: %v", c.Err())
	case <-time.After(500 * time.Millisecond):
	}
	if got := metric(t, n, "inboxd_gateway_stale_login_kicks_total"); got != 1 {
		t.Fatalf("stale kicks %v, want 1", got)
	}

	for _, tc := range []struct{ name, kick string }{
		{"newer login", consumer + " newer-session " + strconv.FormatInt(time.Now().Add(time.Hour).UnixNano(), 10)},
		{"kick without a time", consumer + " legacy-session"},
	} {
		c := c
		if tc.name != "newer login" {
			c = dial()
			time.Sleep(100 * time.Millisecond)
		}
		if err := nc.Publish(subject, []byte(tc.kick)); err != nil {
			t.Fatal(err)
		}
		select {
		case <-c.Done():
			if !errors.Is(c.Err(), client.ErrReplaced) {
				t.Fatalf("%s: client ended with %v, want ErrReplaced", tc.name, c.Err())
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the session was not replaced", tc.name)
		}
	}
}
