package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire/pb"
)

// shortToken is a token of uid/device valid for ttl, signed with the
// test nodes' secret, and its exp as the gateway reads it (the JWT
// NumericDate has a precision of a second: the token lives ttl-1s..ttl).
func shortToken(t testing.TB, uid int64, device string, ttl time.Duration) (string, time.Time) {
	t.Helper()
	tok, err := auth.NewSigner(testenv.Secret).Issue(uid, device, ttl)
	if err != nil {
		t.Fatal(err)
	}
	id, err := testenv.Verifier(t).Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	return tok, id.ExpiresAt
}

// observedGateway starts one more gateway on n (like testnode.Gateway)
// whose log lines at warn and above the test can read.
func observedGateway(t *testing.T, n *node.Node, opts gateway.Options) (*gateway.Gateway, *observer.ObservedLogs) {
	t.Helper()
	core, logs := observer.New(zapcore.WarnLevel)
	log := zap.New(zapcore.NewTee(core, testenv.Logger(t).Core()))
	opts.TCPAddr, opts.WSAddr, opts.Layout = "127.0.0.1:0", "127.0.0.1:0", testnode.Layout()
	g, err := gateway.New(opts, log, n.NC, n.Store, testenv.Verifier(t), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Shutdown)
	return g, logs
}

// checkLogged fails unless logs hold a warn line msg with code and the
// client's address as remote.
//
// The gateway logs the refusal after it queued the fatal frame, so the
// client may see the connection end a moment before the line is written:
// the line is waited for, up to 5s.
func checkLogged(t *testing.T, logs *observer.ObservedLogs, msg string, code pb.ErrorCode, remote string) {
	t.Helper()
	var seen []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		seen = seen[:0]
		for _, l := range logs.FilterMessage(msg).All() {
			f := l.ContextMap()
			if l.Level == zapcore.WarnLevel && f["remote"] == remote && f["code"] == code.String() {
				return
			}
			seen = append(seen, fmt.Sprint(f))
		}
		if time.Now().After(deadline) {
			break
		}
	}
	t.Fatalf("no warn line %q with code %s and remote %s; lines with that message: %v", msg, code, remote, seen)
}

// helloWith logs in with tok and returns the welcome.
func (c *rawTCP) helloWith(tok string) *pb.Welcome {
	c.t.Helper()
	c.write(&pb.Hello{Token: tok, DeviceKind: "desktop"})
	m := c.read()
	w, ok := m.(*pb.Welcome)
	if !ok {
		c.t.Fatalf("hello answered %T %v, want welcome", m, m)
	}
	return w
}

// nextNonBatch returns the next frame that is not a batch (the backfill's
// end and live messages are skipped), or nil when the connection closed.
func (c *rawTCP) nextNonBatch() proto.Message {
	c.t.Helper()
	for {
		m := c.read()
		if _, ok := m.(*pb.Batch); !ok {
			return m
		}
	}
}

// A connection whose token is not refreshed is closed at the token's exp
// with a fatal TOKEN_EXPIRED error (not before), which the welcome
// announced; the gateway logs it with the client's address.
func TestTokenExpiresOnOpenConnection(t *testing.T) {
	n := testnode.AllInOne(t)
	g, logs := observedGateway(t, n, gateway.Options{})
	tok, exp := shortToken(t, 2, "phone", 3*time.Second)
	r := dialRaw(t, g.TCPAddr())
	w := r.helloWith(tok)
	if w.GetTokenExpiresAtMs() != exp.UnixMilli() {
		t.Fatalf("welcome token_expires_at_ms %d, want the token's exp %d", w.GetTokenExpiresAtMs(), exp.UnixMilli())
	}
	m := r.nextNonBatch()
	at := time.Now()
	e, ok := m.(*pb.Error)
	if !ok || e.GetCode() != pb.ErrorCode_TOKEN_EXPIRED || !e.GetFatal() {
		t.Fatalf("at the token's exp: %T %v, want a fatal TOKEN_EXPIRED", m, m)
	}
	if at.Before(exp) {
		t.Fatalf("TOKEN_EXPIRED at %s, before the token's exp %s", at, exp)
	}
	if m := r.read(); m != nil {
		t.Fatalf("the connection is still open after TOKEN_EXPIRED: %v", m)
	}
	checkLogged(t, logs, "token expired on an open connection", pb.ErrorCode_TOKEN_EXPIRED, r.nc.LocalAddr().String())
}

// A connection that refreshed its token before exp stays open past the
// first token's exp, and live messages keep reaching it; it ends at the
// new token's exp.
func TestRefreshKeepsConnectionPastExpiry(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, false, 1, 2)
	tok, exp := shortToken(t, 2, "phone", 3*time.Second)
	r := dialRaw(t, n.Gateway.TCPAddr())
	r.helloWith(tok)
	time.Sleep(time.Until(exp.Add(-time.Second)))
	next, nextExp := shortToken(t, 2, "phone", 8*time.Second)
	r.write(&pb.Refresh{RequestId: 7, Token: next})
	m := r.nextNonBatch()
	res, ok := m.(*pb.RefreshResult)
	if !ok || res.GetRequestId() != 7 || res.GetExpiresAtMs() != nextExp.UnixMilli() {
		t.Fatalf("refresh answered %T %v, want refresh_result 7 with expires_at_ms %d", m, m, nextExp.UnixMilli())
	}
	time.Sleep(time.Until(exp.Add(1500 * time.Millisecond)))
	ids := sendN(t, n, 1, conv, 1, "after-exp")
	for {
		m := r.read()
		if b, ok := m.(*pb.Batch); ok && len(b.GetMessages()) > 0 {
			if b.GetLane() != pb.Lane_LIVE || b.GetMessages()[0].GetMsgId() != ids[0] {
				t.Fatalf("after the first exp got %v, want the live message %d", b, ids[0])
			}
			break
		}
		if _, ok := m.(*pb.Batch); !ok {
			t.Fatalf("after the first exp, before the live message: %T %v (the refresh did not keep the connection)", m, m)
		}
	}
	m = r.nextNonBatch()
	if e, ok := m.(*pb.Error); !ok || e.GetCode() != pb.ErrorCode_TOKEN_EXPIRED || time.Now().Before(nextExp) {
		t.Fatalf("got %T %v at %s, want TOKEN_EXPIRED at the refreshed token's exp %s", m, m, time.Now(), nextExp)
	}
}

// A refresh that is refused — a forged token, a token of another device,
// a token issued before a revocation of the device — gets a non-fatal
// error carrying the request's id; the connection goes on and still ends
// at the old token's exp, although each refused token expires later. Each
// refusal is logged with the client's address.
func TestRefusedRefreshKeepsOldDeadline(t *testing.T) {
	n := testnode.AllInOne(t)
	g, logs := observedGateway(t, n, gateway.Options{})
	old, _ := shortToken(t, 2, "phone", time.Minute) // issued before the revocation
	revokedAt, err := n.Store.Revoke(context.Background(), 2, "phone")
	if err != nil {
		t.Fatal(err)
	}
	// iat has a precision of a second: a token of the revocation's second
	// counts as issued before it.
	time.Sleep(time.Until(revokedAt.Truncate(time.Second).Add(time.Second)))
	tok, exp := shortToken(t, 2, "phone", 4*time.Second)
	r := dialRaw(t, g.TCPAddr())
	r.helloWith(tok)
	other, _ := shortToken(t, 2, "laptop", time.Minute)
	for i, tc := range []struct {
		token string
		want  pb.ErrorCode
	}{
		{"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIyIn0.c2lnbmF0dXJl", pb.ErrorCode_UNAUTHENTICATED},
		{other, pb.ErrorCode_UNAUTHENTICATED},
		{old, pb.ErrorCode_REVOKED},
	} {
		id := uint64(10 + i)
		r.write(&pb.Refresh{RequestId: id, Token: tc.token})
		m := r.nextNonBatch()
		if e, ok := m.(*pb.Error); !ok || e.GetCode() != tc.want || e.GetFatal() || e.GetRequestId() != id {
			t.Fatalf("refresh %d: %T %v, want a non-fatal %s with request_id %d", i, m, m, tc.want, id)
		}
		checkLogged(t, logs, "refresh refused", tc.want, r.nc.LocalAddr().String())
	}
	m := r.nextNonBatch()
	if e, ok := m.(*pb.Error); !ok || e.GetCode() != pb.ErrorCode_TOKEN_EXPIRED {
		t.Fatalf("got %T %v, want TOKEN_EXPIRED at the connection's own token's exp", m, m)
	}
	if now := time.Now(); now.Before(exp) || now.After(exp.Add(5*time.Second)) {
		t.Fatalf("TOKEN_EXPIRED at %s, want at the connection's token's exp %s (a refused refresh moved it)", now, exp)
	}
}

// At hello a token issued before a revocation of its device is refused
// with REVOKED (fatal), and logged with the client's address.
func TestRevokedTokenRefusedAtHello(t *testing.T) {
	n := testnode.AllInOne(t)
	g, logs := observedGateway(t, n, gateway.Options{})
	old := testenv.Token(t, 2, "phone")
	if _, err := n.Store.Revoke(context.Background(), 2, ""); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, g.TCPAddr())
	r.write(&pb.Hello{Token: old})
	r.expectError(pb.ErrorCode_REVOKED, true)
	checkLogged(t, logs, "login refused", pb.ErrorCode_REVOKED, r.nc.LocalAddr().String())
}

// A revocation whose announcement a gateway missed closes the covered
// connection at the gateway's next sweep of the revocations: here the
// revocation is recorded in Postgres and never announced.
func TestRevocationSweepClosesMissedAnnouncement(t *testing.T) {
	n := testnode.AllInOne(t)
	g := testnode.Gateway(t, n, gateway.Options{RevocationSweep: 300 * time.Millisecond})
	r := dialRaw(t, g.TCPAddr())
	r.helloWith(testenv.Token(t, 2, "phone"))
	if _, err := n.Store.Revoke(context.Background(), 2, "phone"); err != nil {
		t.Fatal(err)
	}
	if m := r.nextNonBatch(); !isError(m, pb.ErrorCode_REVOKED) {
		t.Fatalf("after a revocation missed by the gateway: %T %v, want REVOKED at its sweep", m, m)
	}
}

// A gateway whose NATS connection was cut (and so may have missed
// announcements) sweeps the revocations as soon as it is back, not at its
// next periodic sweep (30 s by default, longer than this test waits).
func TestRevocationsSweptAfterNATSReconnect(t *testing.T) {
	n := testnode.AllInOne(t)
	r := dialRaw(t, n.Gateway.TCPAddr())
	r.helloWith(testenv.Token(t, 2, "phone"))
	if _, err := n.Store.Revoke(context.Background(), 2, "phone"); err != nil {
		t.Fatal(err)
	}
	cid, err := n.NC.GetClientID()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.NATS.DisconnectClientByID(cid); err != nil {
		t.Fatal(err)
	}
	if m := r.nextNonBatch(); !isError(m, pb.ErrorCode_REVOKED) {
		t.Fatalf("after the gateway's NATS reconnect: %T %v, want REVOKED", m, m)
	}
}

func isError(m proto.Message, code pb.ErrorCode) bool {
	e, ok := m.(*pb.Error)
	return ok && e.GetCode() == code && e.GetFatal()
}

// A hello whose token is past its exp but within the verifier's leeway
// for clock skew is refused with TOKEN_EXPIRED before a session opens: it
// does not replace the device's session (which a session that ended right
// after its welcome would have).
func TestHelloPastExpWithinLeewayRefused(t *testing.T) {
	n := testnode.AllInOne(t)
	live := dialRaw(t, n.Gateway.TCPAddr())
	live.helloWith(testenv.Token(t, 2, "phone"))
	tok, _ := shortToken(t, 2, "phone", -time.Second) // expired 1–2 s ago
	r := dialRaw(t, n.Gateway.TCPAddr())
	r.write(&pb.Hello{Token: tok})
	r.expectError(pb.ErrorCode_TOKEN_EXPIRED, true)
	time.Sleep(500 * time.Millisecond) // a login that went on would have replaced it by now
	live.write(&pb.Ping{Nonce: 1})
	if m, ok := live.nextNonBatch().(*pb.Pong); !ok {
		t.Fatalf("the device's session after the expired hello: %v, want it untouched (a pong)", m)
	}
}

// In a split deployment the syncer serves the admin API: its NATS user
// announces the revocation on the user's kick subject, and the gateway
// (another node, its own NATS user) closes the device's connection at once
// (not at its sweep, 30 s later).
func TestRevokeInSplitDeployment(t *testing.T) {
	db := testenv.Database(t)
	natsNode := testnode.StartNode(t, testnode.Config(t, db), config.RoleEmbeddedNATS)
	base := testnode.Config(t, db)
	base.NATSURL = natsNode.NATS.ClientURL() // each node: its role's user and password
	scfg := base
	scfg.HTTPAddr = "127.0.0.1:0"
	syncer := testnode.StartNode(t, scfg, config.RoleSyncer)
	gw := testnode.StartNode(t, base, config.RoleGateway)

	r := dialRaw(t, gw.Gateway.TCPAddr())
	r.helloWith(testenv.Token(t, 2, "phone"))
	if _, err := (&admin.Client{NC: testnode.Admin(t, syncer)}).Revoke(ctxT(t, 10*time.Second), admin.RevokeRequest{UID: 2, Device: "phone"}); err != nil {
		t.Fatal(err)
	}
	if m := r.nextNonBatch(); !isError(m, pb.ErrorCode_REVOKED) {
		t.Fatalf("after the revocation: %T %v, want REVOKED at once", m, m)
	}
}
