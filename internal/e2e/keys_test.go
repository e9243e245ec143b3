package e2e

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

const (
	rotationIssuer = "https://idp.example"
	secret202601   = "rotation-secret-2026-01-0123456789abcdef"
	secret202602   = "rotation-secret-2026-02-0123456789abcdef"
)

// writeKeySet writes a --token-keys file of keys (kid → the JSON object's
// other fields).
func writeKeySet(t *testing.T, path string, keys ...map[string]string) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// login dials the node's gateway with token and returns the welcome's uid,
// or the error the gateway refused it with.
func login(t *testing.T, n *node.Node, token string) (int64, error) {
	t.Helper()
	c, err := client.Dial(ctxT(t, 10*time.Second), client.Options{URL: n.Gateway.WSURL(), Token: token})
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.Welcome().GetUid(), nil
}

// refusedWith asserts that err is the gateway's UNAUTHENTICATED with want
// in its message.
func refusedWith(t *testing.T, what string, err error, want string) {
	t.Helper()
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != pb.ErrorCode_UNAUTHENTICATED || !strings.Contains(we.Message, want) {
		t.Errorf("%s: %v, want UNAUTHENTICATED with %q", what, err, want)
	}
}

func startKeysNode(t *testing.T, cfg config.Config) *node.Node {
	t.Helper()
	n, err := node.Start(ctxT(t, 60*time.Second), cfg, config.RoleAllInOne, testenv.Logger(t))
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return n
}

// Key rotation on a real gateway (--token-keys): while the set holds the
// old key (HS256, kid 2026-01), the new one (HS256, kid 2026-02) and an
// Ed25519 key (kid ed-1), tokens of all three log in; tokens of an unknown
// kid, without kid (there is no --token-secret), of another issuer or
// longer than --token-max-ttl are refused. After the gateway restarts with
// the old key removed, the old key's token is refused and the others still
// log in.
func TestTokenKeyRotation(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	der, _ := x509.MarshalPKIXPublicKey(pub)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokens-ed-1.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	oldKey := map[string]string{"kid": "2026-01", "secret": secret202601}
	newKey := map[string]string{"kid": "2026-02", "secret": secret202602}
	edKey := map[string]string{"kid": "ed-1", "ed25519_key_file": "tokens-ed-1.pub"}
	keysFile := filepath.Join(dir, "keys.json")
	writeKeySet(t, keysFile, oldKey, newKey, edKey)

	cfg := testnode.Config(t, testenv.Database(t))
	cfg.TokenSecret, cfg.TokenKeysFile, cfg.TokenIssuer, cfg.TokenMaxTTL = "", keysFile, rotationIssuer, 2*time.Hour
	oldSigner := auth.NewSigner(secret202601).WithKeyID("2026-01").WithIssuer(rotationIssuer)
	issue := func(s *auth.Signer, uid int64, ttl time.Duration) string {
		tok, err := s.Issue(uid, "phone", ttl)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	oldTok := issue(oldSigner, 1, time.Hour)
	newTok := issue(auth.NewSigner(secret202602).WithKeyID("2026-02").WithIssuer(rotationIssuer), 2, time.Hour)
	edTok := issue(auth.NewEdSigner(priv).WithKeyID("ed-1").WithIssuer(rotationIssuer), 3, time.Hour)

	n := startKeysNode(t, cfg)
	for uid, tok := range map[int64]string{1: oldTok, 2: newTok, 3: edTok} {
		if got, err := login(t, n, tok); err != nil || got != uid {
			t.Fatalf("during the rotation, uid %d's token: uid %d, %v", uid, got, err)
		}
	}
	for _, tc := range []struct{ name, token, want string }{
		{"unknown kid", issue(auth.NewSigner(secret202601).WithKeyID("2025-12").WithIssuer(rotationIssuer), 4, time.Hour), "unknown kid"},
		{"no kid", issue(auth.NewSigner(testenv.Secret).WithIssuer(rotationIssuer), 4, time.Hour), "no HS256 key without kid"},
		{"the kid of another key", issue(auth.NewSigner(secret202601).WithKeyID("2026-02").WithIssuer(rotationIssuer), 4, time.Hour), "signature is invalid"},
		{"HS256 signed with the Ed25519 key's bytes, its kid", issue(auth.NewSigner(string(pub)).WithKeyID("ed-1").WithIssuer(rotationIssuer), 4, time.Hour), "kid names an EdDSA key"},
		{"another issuer", issue(auth.NewSigner(secret202601).WithKeyID("2026-01").WithIssuer("https://other.example"), 4, time.Hour), "invalid issuer"},
		{"no issuer", issue(auth.NewSigner(secret202601).WithKeyID("2026-01"), 4, time.Hour), "iss claim is required"},
		{"longer than --token-max-ttl", issue(oldSigner, 4, 3*time.Hour), "lifetime 3h0m0s exceeds the maximum 2h0m0s"},
	} {
		_, err := login(t, n, tc.token)
		refusedWith(t, tc.name, err, tc.want)
	}
	n.Close()

	writeKeySet(t, keysFile, newKey, edKey) // the old key removed
	n = startKeysNode(t, cfg)
	defer n.Close()
	_, err := login(t, n, oldTok)
	refusedWith(t, "the old key's token after its removal", err, "unknown kid")
	for uid, tok := range map[int64]string{2: newTok, 3: edTok} {
		if got, err := login(t, n, tok); err != nil || got != uid {
			t.Fatalf("after the rotation, uid %d's token: uid %d, %v", uid, got, err)
		}
	}
}

// productionEnv sets the embedded NATS server's admin password, so that the
// only development secrets are the ones a test puts in.
func productionEnv(t *testing.T) {
	t.Setenv("INBOXD_NATS_PASSWORD_"+strings.ToUpper(string(natsauth.Admin)), "an-admin-password-of-this-test")
}

// listenerFlags are the flags of listeners, and how to set each.
var listenerFlags = []struct {
	flag string
	set  func(*config.Config, string)
}{
	{"--ws", func(c *config.Config, a string) { c.WSAddr = a }},
	{"--tcp", func(c *config.Config, a string) { c.TCPAddr = a }},
	{"--http", func(c *config.Config, a string) { c.HTTPAddr = a }},
	{"--nats-listen", func(c *config.Config, a string) { c.NATSListen = a }},
}

// Every listener flag on an address reachable beyond loopback, with each
// development secret in turn: the node refuses to start, naming the secret
// and the listener. Nothing was bound (the check runs first, and
// startUnbound's node could not have come up anyway).
func TestDevSecretOnReachableListenerRefused(t *testing.T) {
	productionEnv(t)
	prodDB := "postgres://inboxd:a-production-password@127.0.0.1:5432/inboxd"
	secrets := []struct {
		setting string
		use     func(t *testing.T, c *config.Config)
	}{
		{"--token-secret", func(t *testing.T, c *config.Config) { c.TokenSecret = auth.DevSecret }},
		{"INBOXD_NATS_PASSWORD_ADMIN", func(t *testing.T, c *config.Config) { t.Setenv("INBOXD_NATS_PASSWORD_ADMIN", "") }},
		{"--database-url", func(t *testing.T, c *config.Config) { c.DatabaseURL = "postgres://inboxd:inboxd@127.0.0.1:5432/inboxd" }},
	}
	for _, l := range listenerFlags {
		for _, addr := range []string{"0.0.0.0:0", ":0"} {
			for _, s := range secrets {
				t.Run(l.flag+" "+addr+" "+s.setting, func(t *testing.T) {
					cfg := testnode.Config(t, prodDB)
					l.set(&cfg, addr)
					s.use(t, &cfg)
					err := startUnbound(t, cfg, testenv.Logger(t))
					for _, want := range []string{s.setting, l.flag + " " + addr + " is reachable beyond loopback", "pass --dev"} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("error %q does not name %q", err, want)
						}
					}
				})
			}
		}
	}
}

// startUnbound starts a node that cannot come up: its gateway's TLS files
// are missing, and they are loaded right after the exposure check, before
// anything listens. Whether the check refuses or passes, nothing binds an
// address beyond loopback. It returns the start's error.
func startUnbound(t *testing.T, cfg config.Config, log *zap.Logger) error {
	t.Helper()
	cfg.TLSCert, cfg.TLSKey = filepath.Join(t.TempDir(), "missing.pem"), filepath.Join(t.TempDir(), "missing.key")
	n, err := node.Start(ctxT(t, 10*time.Second), cfg, config.RoleAllInOne, log)
	if err == nil {
		n.Close()
		t.Fatal("started without its TLS files")
	}
	return err
}

// passesCheck: the start gets past the exposure check and fails at the TLS
// files.
func passesCheck(t *testing.T, cfg config.Config, log *zap.Logger) {
	t.Helper()
	if err := startUnbound(t, cfg, log); !strings.Contains(err.Error(), "gateway: tls") {
		t.Fatalf("start failed with %v, want the missing TLS files (past the check)", err)
	}
}

// Production secrets on every listener flag beyond loopback pass the
// check; so do the development secrets with --dev, which says so loudly.
func TestReachableListenerPassesWithProductionSecretsOrDev(t *testing.T) {
	productionEnv(t)
	for _, l := range listenerFlags {
		t.Run("production "+l.flag, func(t *testing.T) {
			cfg := testnode.Config(t, "postgres://inboxd:a-production-password@127.0.0.1:5432/inboxd")
			l.set(&cfg, "0.0.0.0:0")
			passesCheck(t, cfg, testenv.Logger(t))
		})
		t.Run("--dev "+l.flag, func(t *testing.T) {
			t.Setenv("INBOXD_NATS_PASSWORD_ADMIN", "")
			core, logs := observer.New(zapcore.WarnLevel)
			cfg := testnode.Config(t, "postgres://inboxd:inboxd@127.0.0.1:5432/never-reached") // the development password
			cfg.TokenSecret, cfg.Dev = auth.DevSecret, true
			l.set(&cfg, "0.0.0.0:0")
			passesCheck(t, cfg, zap.New(zapcore.NewTee(testenv.Logger(t).Core(), core)))
			if logs.FilterMessageSnippet("DEVELOPMENT SECRETS ON ADDRESSES REACHABLE BEYOND LOOPBACK").Len() != 1 {
				t.Errorf("no loud --dev warning: %v", logs.All())
			}
		})
	}
}

// On loopback the development secrets start as before (make run), with the
// warnings they always had; with --dev too, which warns that it is set. A
// client logs in with a development-secret token.
func TestDevSecretsOnLoopbackStart(t *testing.T) {
	t.Setenv("INBOXD_NATS_PASSWORD_ADMIN", "")
	for _, dev := range []bool{false, true} {
		core, logs := observer.New(zapcore.WarnLevel)
		cfg := testnode.Config(t, testenv.Database(t)) // loopback, the development Postgres password
		cfg.TokenSecret, cfg.Dev = auth.DevSecret, dev
		n, err := node.Start(ctxT(t, 60*time.Second), cfg, config.RoleAllInOne, zap.New(zapcore.NewTee(testenv.Logger(t).Core(), core)))
		if err != nil {
			t.Fatalf("--dev=%v on loopback: %v", dev, err)
		}
		tok, _ := auth.NewSigner(auth.DevSecret).Issue(5, "d", time.Hour)
		if uid, err := login(t, n, tok); err != nil || uid != 5 {
			t.Errorf("--dev=%v: login with a development token: uid %d, %v", dev, uid, err)
		}
		n.Close()
		want := []string{"development token secret", "admin user has the development password"}
		if dev {
			want = append(want, "--dev is set")
		}
		for _, w := range want {
			if logs.FilterMessageSnippet(w).Len() == 0 {
				t.Errorf("--dev=%v: no warning %q", dev, w)
			}
		}
	}
}
