package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// Each service's NATS user can do its job and nothing else: a sample of
// what each must not do is refused by the server.
func TestNATSUsersHaveLeastPrivilege(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	n := testnode.StartNode(t, cfg, config.RoleEmbeddedNATS) // --nats-only: one user per service
	url := n.NATS.ClientURL()
	if _, err := nats.Connect(url); err == nil {
		t.Fatal("an anonymous client got in")
	}
	if _, err := nats.Connect(url, nats.UserInfo("gateway", "wrong")); err == nil {
		t.Fatal("a wrong password got in")
	}
	for _, c := range []struct {
		role natsauth.Role
		pub  string // must be refused
		sub  string // must be refused
	}{
		{natsauth.Gateway, "$JS.API.STREAM.DELETE.INBOX_0", "inboxd.admin.>"},
		{natsauth.Fanout, "$JS.API.CONSUMER.CREATE.INBOX_0.x", "inboxd.u.*.*.*"},
		{natsauth.Syncer, "send.0.1", "_INBOXD.gw.>"},
	} {
		errs := make(chan error, 4)
		nc, err := nats.Connect(url, nats.UserInfo(string(c.role), natsauth.Password(c.role)),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
		if err != nil {
			t.Fatalf("%s: %v", c.role, err)
		}
		_ = nc.Publish(c.pub, []byte("x"))
		_, _ = nc.SubscribeSync(c.sub)
		_ = nc.Flush()
		seen := map[string]bool{}
		deadline := time.After(5 * time.Second)
		for len(seen) < 2 {
			select {
			case err := <-errs:
				msg := strings.ToLower(err.Error())
				if strings.Contains(msg, "permissions violation for publish") {
					seen["pub"] = true
				}
				if strings.Contains(msg, "permissions violation for subscription") {
					seen["sub"] = true
				}
			case <-deadline:
				t.Fatalf("%s: refusals seen %v; want publish to %s and subscribe to %s refused", c.role, seen, c.pub, c.sub)
			}
		}
		nc.Close()
	}
	// The admin user (the nats CLI, inboxctl) may do anything.
	nc, err := nats.Connect(url, nats.UserInfo("admin", natsauth.Password(natsauth.Admin)))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
}
