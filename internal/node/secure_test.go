package node

import (
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
)

const (
	prodSecret = "a-production-secret-0123456789abcdef"
	prodDB     = "postgres://inboxd:a-production-password@db.internal:5432/inboxd"
)

// clearNATSPasswords makes every role's NATS password the development one
// for the test (as on a box without INBOXD_NATS_PASSWORD_*).
func clearNATSPasswords(t *testing.T) {
	for _, r := range append(natsauth.Roles, natsauth.AllInOne) {
		t.Setenv(natsPasswordEnv(r), "")
	}
	t.Setenv("PGPASSWORD", "")
}

// production is the configuration of a production all-in-one install: no
// development secret anywhere.
func production(t *testing.T) config.Config {
	t.Setenv(natsPasswordEnv(natsauth.Admin), "an-admin-password")
	for _, r := range []natsauth.Role{natsauth.Gateway, natsauth.Fanout, natsauth.Syncer} {
		t.Setenv(natsPasswordEnv(r), "a-"+string(r)+"-password")
	}
	c := config.Defaults()
	c.TokenSecret, c.DatabaseURL = prodSecret, prodDB
	return c
}

// The exposure check, one row per configuration: which development secret
// is in use, which address is reachable, and what the error names.
func TestCheckExposure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		roles config.Role
		setup func(t *testing.T, c *config.Config)
		want  []string // pieces of the error; nil: the check passes
	}{
		{"make run: development defaults on loopback", config.RoleAllInOne, func(t *testing.T, c *config.Config) { *c = config.Defaults() }, nil},
		{"loopback names and IPs", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			*c = config.Defaults()
			c.WSAddr, c.TCPAddr, c.HTTPAddr, c.NATSListen = "localhost:7070", "[::1]:7071", "127.0.0.2:7072", "LOCALHOST:4222"
		}, nil},
		{"the decision's example", config.RoleGateway, func(t *testing.T, c *config.Config) {
			c.TokenSecret, c.WSAddr, c.NATSPassword = auth.DevSecret, "0.0.0.0:7070", "a-gateway-password"
		}, []string{"--token-secret is the development secret and --ws 0.0.0.0:7070 is reachable beyond loopback; set a secret (INBOXD_TOKEN_SECRET) or pass --dev for a trial"}},
		{"--tcp on every interface (empty host)", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			c.TokenSecret, c.TCPAddr = auth.DevSecret, ":7071"
		}, []string{"--token-secret is the development secret", "--tcp :7071 is reachable"}},
		{"--http on ::", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			c.TokenSecret, c.HTTPAddr = auth.DevSecret, "[::]:7072"
		}, []string{"--token-secret", "--http [::]:7072"}},
		{"--nats-listen on a LAN address", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			c.TokenSecret, c.NATSListen = auth.DevSecret, "10.1.2.3:4222"
		}, []string{"--token-secret", "--nats-listen 10.1.2.3:4222"}},
		{"--ws on a host name", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			c.TokenSecret, c.WSAddr = auth.DevSecret, "chat.example.com:443"
		}, []string{"--token-secret", "--ws chat.example.com:443"}},
		{"--debug-http beyond loopback (checkDebugAddr refuses it before, too)", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			c.TokenSecret, c.DebugHTTPAddr = auth.DevSecret, "0.0.0.0:6060"
		}, []string{"--token-secret", "--debug-http 0.0.0.0:6060 is reachable"}},
		{"--debug-http off", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			*c = config.Defaults()
			c.DebugHTTPAddr = ""
		}, nil},
		{"an unparsable address counts as reachable", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			c.TokenSecret, c.WSAddr = auth.DevSecret, "7070"
		}, []string{"--ws 7070"}},
		{"the development token secret beside --token-keys", config.RoleGateway, func(t *testing.T, c *config.Config) {
			c.TokenSecret, c.TokenKeysFile, c.WSAddr, c.NATSPassword = auth.DevSecret, "keys.json", "0.0.0.0:7070", "pw"
		}, []string{`--token-secret "" to verify with the other token keys only`}},
		{"the embedded server's admin password", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			t.Setenv(natsPasswordEnv(natsauth.Admin), "")
			c.WSAddr = "0.0.0.0:7070"
		}, []string{"the embedded NATS user admin has the development password and --ws 0.0.0.0:7070 is reachable beyond loopback; set INBOXD_NATS_PASSWORD_ADMIN or pass --dev"}},
		{"inboxd --nats-only: every service user's password", config.RoleEmbeddedNATS, func(t *testing.T, c *config.Config) {
			clearNATSPasswords(t)
			c.NATSListen = "0.0.0.0:4222"
		}, []string{"user admin", "user gateway", "user fanout", "user syncer", "user pushbridge", ", while --nats-listen 0.0.0.0:4222 is reachable",
			"set INBOXD_NATS_PASSWORD_ADMIN, set INBOXD_NATS_PASSWORD_GATEWAY, set INBOXD_NATS_PASSWORD_FANOUT, set INBOXD_NATS_PASSWORD_SYNCER, set INBOXD_NATS_PASSWORD_PUSHBRIDGE or pass --dev"}},
		{"the all-in-one with --push: the push bridge's user", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			t.Setenv(natsPasswordEnv(natsauth.Admin), "admin-pw")
			t.Setenv(natsPasswordEnv(natsauth.PushBridge), "")
			c.Push, c.NATSListen = true, "0.0.0.0:4222"
		}, []string{"the embedded NATS user pushbridge has the development password", "set INBOXD_NATS_PASSWORD_PUSHBRIDGE"}},
		{"the Postgres development password", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			c.DatabaseURL, c.WSAddr = "postgres://inboxd:inboxd@127.0.0.1:5432/inboxd", "0.0.0.0:7070"
		}, []string{"--database-url has the development password and --ws 0.0.0.0:7070", "set DATABASE_URL"}},
		{"the Postgres development password from PGPASSWORD", config.RoleFanout, func(t *testing.T, c *config.Config) {
			t.Setenv("PGPASSWORD", "inboxd")
			c.DatabaseURL, c.HTTPAddr, c.NATSPassword = "postgres://inboxd@127.0.0.1:5432/inboxd", "0.0.0.0:7073", "pw"
		}, []string{"--database-url has the development password and --http 0.0.0.0:7073"}},
		{"a fanout: its NATS login's development password (from the environment)", config.RoleFanout, func(t *testing.T, c *config.Config) {
			t.Setenv(natsPasswordEnv(natsauth.Fanout), "")
			c.HTTPAddr = "0.0.0.0:7073"
		}, []string{"the NATS password of user fanout is a development password and --http 0.0.0.0:7073", "set INBOXD_NATS_PASSWORD_FANOUT"}},
		{"a gateway: a development password given as --nats-password", config.RoleGateway, func(t *testing.T, c *config.Config) {
			c.NATSPassword, c.WSAddr = natsauth.DevPassword(natsauth.Gateway), "0.0.0.0:7070"
		}, []string{"the NATS password of user gateway", "set --nats-password (NATS_PASSWORD)"}},
		{"a syncer on loopback logging in to a remote NATS with a development password", config.RoleSyncer, func(t *testing.T, c *config.Config) {
			t.Setenv(natsPasswordEnv(natsauth.Syncer), "")
			c.NATSURL = "nats://127.0.0.1:4222, nats://syncer:pw-in-url@10.0.0.5:4222"
		}, []string{"the NATS password of user syncer is a development password and --nats 10.0.0.5:4222 is reachable"}},
		{"a remote NATS with a credentials file (no password sent)", config.RoleGateway, func(t *testing.T, c *config.Config) {
			t.Setenv(natsPasswordEnv(natsauth.Gateway), "")
			c.NATSURL, c.NATSCreds = "tls://10.0.0.5:4222", "/etc/inboxd/gateway.creds"
		}, nil},
		{"a remote NATS with production passwords", config.RoleSyncer, func(t *testing.T, c *config.Config) {
			c.NATSURL = "nats://10.0.0.5:4222,tls://10.0.0.6:4222"
		}, nil},
		{"a fanout without the token secret's role ignores it", config.RoleFanout, func(t *testing.T, c *config.Config) {
			c.TokenSecret, c.HTTPAddr = auth.DevSecret, "0.0.0.0:7073"
		}, nil},
		{"production secrets on every interface", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			c.WSAddr, c.TCPAddr, c.HTTPAddr, c.NATSListen = "0.0.0.0:7070", ":7071", "[::]:7072", "10.1.2.3:4222"
		}, nil},
		// The cluster routes (--cluster-listen): their password guards
		// every stream of the installation.
		{"--cluster-listen beyond loopback with the development cluster password", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			t.Setenv(natsauth.ClusterPasswordEnv, "")
			c.ClusterListen = "10.1.2.3:6222"
		}, []string{"the cluster routes have the development password and --cluster-listen 10.1.2.3:6222 is reachable beyond loopback; set INBOXD_CLUSTER_PASSWORD (the same on every node) or pass --dev"}},
		{"inboxd --nats-only: --cluster-listen on every interface with the development cluster password", config.RoleEmbeddedNATS, func(t *testing.T, c *config.Config) {
			t.Setenv(natsauth.ClusterPasswordEnv, "")
			c.ClusterListen = ":6222"
		}, []string{"the cluster routes have the development password", "--cluster-listen :6222 is reachable"}},
		{"a 3-node cluster on one machine: loopback, development defaults", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			*c = config.Defaults()
			t.Setenv(natsauth.ClusterPasswordEnv, "")
			c.ClusterListen, c.Routes = "127.0.0.1:6222", "nats://127.0.0.1:6223,nats://127.0.0.1:6224"
		}, nil},
		{"--cluster-listen beyond loopback with a cluster password", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			t.Setenv(natsauth.ClusterPasswordEnv, "a-cluster-password")
			c.ClusterListen = "10.1.2.3:6222"
		}, nil},
		{"a development token secret beside a public --cluster-listen", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			t.Setenv(natsauth.ClusterPasswordEnv, "a-cluster-password")
			c.TokenSecret, c.ClusterListen = auth.DevSecret, "10.1.2.3:6222"
		}, []string{"--token-secret is the development secret and --cluster-listen 10.1.2.3:6222 is reachable"}},
		{"--dev allows them", config.RoleAllInOne, func(t *testing.T, c *config.Config) {
			*c = config.Defaults()
			c.Dev, c.WSAddr, c.NATSListen = true, "0.0.0.0:7070", "0.0.0.0:4222"
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := production(t)
			tc.setup(t, &c)
			err := checkExposure(c, tc.roles, zap.NewNop())
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("passed, want an error with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			for _, secret := range []string{auth.DevSecret, natsauth.DevPassword(natsauth.Admin), "pw-in-url", ":inboxd@", natsauth.DevClusterPassword} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error prints a secret (%q): %v", secret, err)
				}
			}
		})
	}
}

// --dev logs loudly what it allows, and that it is set when it allows
// nothing.
func TestDevWarns(t *testing.T) {
	clearNATSPasswords(t)
	for _, tc := range []struct {
		name, ws, want string
	}{
		{"reachable", "0.0.0.0:7070", "--dev: DEVELOPMENT SECRETS ON ADDRESSES REACHABLE BEYOND LOOPBACK"},
		{"loopback", "127.0.0.1:7070", "--dev is set"},
	} {
		core, logs := observer.New(zapcore.WarnLevel)
		c := config.Defaults()
		c.Dev, c.WSAddr = true, tc.ws
		if err := checkExposure(c, config.RoleAllInOne, zap.New(core)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if logs.FilterMessageSnippet(tc.want).Len() != 1 {
			t.Errorf("%s: no warning %q in %v", tc.name, tc.want, logs.All())
		}
	}
}
