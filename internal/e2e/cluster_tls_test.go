package e2e

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/natsembed"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// routeCert writes a certificate for 127.0.0.1 usable on both ends of a
// route (server and client) and its key; it returns their paths.
func (ca *testCA) routeCert(t *testing.T, dir, name string) (cert, key string) {
	t.Helper()
	c := ca.issue(t, x509.ExtKeyUsageServerAuth) // for its key
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, c.PrivateKey.(crypto.Signer).Public(), ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	writePEM(t, cert, "CERTIFICATE", der)
	writePEM(t, key, "PRIVATE KEY", keyDER)
	return cert, key
}

// With --cluster-tls-cert, -key and -ca the routes are mutual TLS: a
// server that knows the route password but has no certificate of the CA
// does not join; a node with one does. The three flags go together.
func TestClusterRoutesOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t)
	caFile := filepath.Join(dir, "ca.crt")
	writePEM(t, caFile, "CERTIFICATE", ca.der)
	r1, r2 := testenv.FreePort(t), testenv.FreePort(t)
	nodeCfg := func(name string, route, peer int) config.Config {
		c := testnode.Config(t, "")
		c.NodeName, c.ClusterListen, c.Routes = name, "127.0.0.1:"+strconv.Itoa(route), "nats://127.0.0.1:"+strconv.Itoa(peer)
		c.ClusterTLSCert, c.ClusterTLSKey = ca.routeCert(t, dir, name)
		c.ClusterTLSCA = caFile
		return c
	}

	half := nodeCfg("half", testenv.FreePort(t), r1)
	half.ClusterTLSCA = ""
	if err := startFails(t, half, config.RoleEmbeddedNATS); err == nil || !strings.Contains(err.Error(), "--cluster-tls-ca") {
		t.Fatalf("a start with two of the three TLS flags: %v, want an error naming them", err)
	}

	n1 := testnode.StartNode(t, nodeCfg("n1", r1, r2), config.RoleEmbeddedNATS)
	plain, err := natsembed.Start(natsembed.Options{Port: testenv.FreePort(t), StoreDir: t.TempDir(), Name: "plain",
		ClusterListen: "127.0.0.1:" + strconv.Itoa(r2), Routes: []string{"nats://127.0.0.1:" + strconv.Itoa(r1)},
		ClusterUser: natsauth.ClusterUser, ClusterPassword: natsauth.ClusterPassword()})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if n := n1.NATS.NumRoutes(); n != 0 {
		t.Fatalf("a server without a route certificate joined: %d routes", n)
	}
	plain.Shutdown()
	plain.WaitForShutdown()

	testnode.StartNode(t, nodeCfg("n2", r2, r1), config.RoleEmbeddedNATS)
	deadline := time.Now().Add(15 * time.Second)
	for n1.NATS.NumRoutes() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a node with a route certificate of the CA did not join over TLS")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
