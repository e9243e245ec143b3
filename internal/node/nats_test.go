package node

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
)

// With --nats-creds the login is the credentials file alone: a configured
// or default user and password are not sent along; without it, the
// service's role and password are. Either way the connections use the
// role's reply prefix.
func TestServiceLoginOptions(t *testing.T) {
	creds := credsFile(t)
	for _, c := range []struct {
		creds, wantUser, wantPassword string
		wantJWT                       bool
	}{
		{"", "fanout", "configured-pw", false},
		{creds, "", "", true},
	} {
		cfg := config.Defaults()
		cfg.NATSPassword, cfg.NATSCreds = "configured-pw", c.creds
		o := nats.GetDefaultOptions()
		for _, opt := range serviceLogin(cfg, config.RoleFanout).options() {
			if err := opt(&o); err != nil {
				t.Fatal(err)
			}
		}
		if o.User != c.wantUser || o.Password != c.wantPassword || (o.UserJWT != nil) != c.wantJWT {
			t.Errorf("creds %q: user %q, password %q, JWT callback %v; want %q, %q, %v",
				c.creds, o.User, o.Password, o.UserJWT != nil, c.wantUser, c.wantPassword, c.wantJWT)
		}
		if o.InboxPrefix != natsauth.InboxPrefix(natsauth.Fanout) {
			t.Errorf("creds %q: reply prefix %q, want %q", c.creds, o.InboxPrefix, natsauth.InboxPrefix(natsauth.Fanout))
		}
	}
}

// credsFile writes a user's credentials file (JWT and seed).
func credsFile(t *testing.T) string {
	t.Helper()
	akp, _ := nkeys.CreateAccount()
	ukp, _ := nkeys.CreateUser()
	upub, _ := ukp.PublicKey()
	ujwt, err := jwt.NewUserClaims(upub).Encode(akp)
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := ukp.Seed()
	b, err := jwt.FormatUserConfig(ujwt, seed)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "fanout.creds")
	if err := os.WriteFile(f, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}
