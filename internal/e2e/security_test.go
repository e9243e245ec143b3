package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

var allRoles = config.RoleEmbeddedNATS | config.RoleGateway | config.RoleFanout | config.RoleSyncer

// selfSigned writes a certificate for 127.0.0.1 and returns the files and a
// pool that trusts it.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "inboxd-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLSListeners(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.TLSCert, cfg.TLSKey = certFile, keyFile
	n := testnode.StartNode(t, cfg, allRoles)
	conv := createConv(t, n, false, 1, 2)
	ctx := ctxT(t, 20*time.Second)
	for _, url := range []string{n.Gateway.WSURL(), "tls://" + n.Gateway.TCPAddr()} {
		c, err := client.Dial(ctx, client.Options{URL: url, Token: testenv.Token(t, 1, "d"), TLSConfig: &tls.Config{RootCAs: pool}})
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		if _, err := c.Send(ctx, conv, "tls-"+url[:3], "over tls"); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	// Plain text is not served.
	dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if _, err := client.Dial(dctx, client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, 1, "d")}); err == nil {
		t.Fatal("a plain TCP client got through a TLS listener")
	}
	// An untrusted certificate is refused by the client.
	if _, err := client.Dial(dctx, client.Options{URL: n.Gateway.WSURL(), Token: testenv.Token(t, 1, "d")}); err == nil {
		t.Fatal("the client accepted an unknown certificate")
	}
}

func TestEdDSATokensOnly(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	der, _ := x509.MarshalPKIXPublicKey(pub)
	keyFile := filepath.Join(t.TempDir(), "tokens.pub")
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600)
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.TokenSecret, cfg.TokenEdKeyFile = "", keyFile
	n := testnode.StartNode(t, cfg, allRoles)
	ctx := ctxT(t, 20*time.Second)
	tok, _ := auth.NewEdSigner(priv).Issue(3, "d", time.Minute)
	c, err := client.Dial(ctx, client.Options{URL: n.Gateway.WSURL(), Token: tok})
	if err != nil {
		t.Fatalf("EdDSA token refused: %v", err)
	}
	c.Close()
	_, err = client.Dial(ctx, client.Options{URL: n.Gateway.WSURL(), Token: testenv.Token(t, 3, "d")})
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != pb.ErrorCode_UNAUTHENTICATED {
		t.Fatalf("HS256 token on an EdDSA-only gateway: %v", err)
	}
}

func TestConnectionsPerUserLimited(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.MaxConnsPerUser = 2
	n := testnode.StartNode(t, cfg, allRoles)
	ctx := ctxT(t, 20*time.Second)
	for _, d := range []string{"a", "b"} {
		connectDevice(t, n, 4, d, deviceOpts{})
	}
	_, err := client.Dial(ctx, client.Options{URL: n.Gateway.WSURL(), Token: testenv.Token(t, 4, "c")})
	var we *wire.Error
	if !errors.As(err, &we) || we.Code != pb.ErrorCode_LIMIT_EXCEEDED {
		t.Fatalf("third connection: %v", err)
	}
	// The same device again replaces its session instead of counting twice.
	connectDevice(t, n, 4, "a", deviceOpts{})
}

// Sends above the per-user rate are refused for now and retried by the
// client: every one is stored once, nothing is lost.
func TestSendRateLimitedNothingLost(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.SendRate = 20
	n := testnode.StartNode(t, cfg, allRoles)
	conv := createConv(t, n, false, 1, 2)
	ids := sendN(t, n, 1, conv, 80, "rl")
	if metric(t, n, `inboxd_gateway_send_results_total{status="RATE_LIMITED"}`) == 0 {
		t.Fatal("80 sends at 20/s (burst 40) were never rate limited")
	}
	if got := count(t, n, `SELECT count(*) FROM msg_content`); got != 80 {
		t.Fatalf("%d stored, want 80", got)
	}
	d := connectDevice(t, n, 2, "d", deviceOpts{})
	d.waitFor(80, 30*time.Second)
	checkOrderedOnce(t, d.quiet(300*time.Millisecond), ids)
}

// Nobody reaches another user's conversations, inbox or cursor.
func TestAuthorizationEverywhere(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	sendN(t, n, 1, conv, 3, "auth")
	victim := connectDevice(t, n, 2, "d", deviceOpts{})
	victim.waitFor(3, 10*time.Second)
	ctx := ctxT(t, 20*time.Second)
	intruder := connectDevice(t, n, 66, "d", deviceOpts{})
	var we *wire.Error
	if _, err := intruder.c.Read(ctx, conv, 3); !errors.As(err, &we) || we.Code != pb.ErrorCode_NOT_MEMBER {
		t.Fatalf("read of a foreign conversation: %v", err)
	}
	if _, _, err := intruder.c.ReadCount(ctx, conv, 1); !errors.As(err, &we) || we.Code != pb.ErrorCode_NOT_MEMBER {
		t.Fatalf("read count of a foreign conversation: %v", err)
	}
	if _, err := intruder.c.Send(ctx, conv, "x", "hi"); !errors.As(err, &we) || we.Code != pb.ErrorCode_NOT_MEMBER {
		t.Fatalf("send to a foreign conversation: %v", err)
	}
	// The intruder's inbox and cursor are its own: nothing of uid 2's.
	if got := intruder.quiet(300 * time.Millisecond); len(got) != 0 {
		t.Fatalf("intruder received %d messages", len(got))
	}
	if w := intruder.c.Welcome(); w.GetUid() != 66 || w.GetPending() != 0 {
		t.Fatalf("intruder welcome %v", w)
	}
}
