package gateway

import (
	"bufio"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/time/rate"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// loginTestGateway is a gateway with just what a refused login uses (no
// NATS, no Postgres: a refused token never reaches them).
func loginTestGateway(log *zap.Logger) *Gateway {
	g := &Gateway{opts: Options{HelloTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, OutQueue: 16, MaxFrame: wire.DefaultMaxFrame},
		log: log, metrics: newMetrics(prometheus.NewRegistry()), verifier: loginTestVerifier(),
		loginWarns: newLogLimiter(5)}
	g.admit = newAdmission(DefaultOptions().LoginConcurrency, rate.Inf, admissionMetricsOf(g.metrics))
	return g
}

// loginTestVerifier: a refused login needs a verifier, whatever its key.
func loginTestVerifier() *auth.Verifier {
	v, err := auth.NewHS256Verifier("login-test-secret-0123456789abcdef")
	if err != nil {
		panic(err)
	}
	return v
}

// refusedLogin runs one login with a forged token over real TCP and
// returns the client's address and the error it was sent.
func refusedLogin(t *testing.T, g *Gateway, ln net.Listener) (string, *pb.Error) {
	t.Helper()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c := newConn(g, server, &tcpTransport{r: bufio.NewReader(server), max: wire.DefaultMaxFrame})
	defer c.close()
	f, _ := wire.AppendFrame(nil, &pb.Hello{Token: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl"})
	if _, err := client.Write(append([]byte{0, 0, 0, byte(len(f))}, f...)); err != nil {
		t.Fatal(err)
	}
	if c.hello() {
		t.Fatal("a forged token logged in")
	}
	_ = client.SetReadDeadline(time.Now().Add(5 * time.Second))
	frame, err := wire.ReadTCPFrame(bufio.NewReader(client), nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	_, m, err := wire.Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := m.(*pb.Error)
	return client.LocalAddr().String(), e
}

// A refused login is logged at warn with the remote address, at most a few
// lines a second per gateway; a line after a burst says how many were
// suppressed.
func TestFailedLoginsLoggedRateLimited(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	g := loginTestGateway(zap.New(core))
	// The limiter's clock stands still during the burst and moves 300 ms
	// after it: how long 40 logins take on a loaded machine does not matter.
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	g.loginWarns.now = func() time.Time { return time.Unix(0, clock.Load()) }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	remotes := map[string]bool{}
	const attempts = 40
	for i := 0; i < attempts; i++ {
		remote, e := refusedLogin(t, g, ln)
		if e == nil || e.Code != pb.ErrorCode_UNAUTHENTICATED || !e.Fatal {
			t.Fatalf("forged token answered %v, want fatal UNAUTHENTICATED", e)
		}
		remotes[remote] = true
	}
	burst := logs.TakeAll()
	if len(burst) != 5 {
		t.Fatalf("%d log lines for %d refused logins in a burst, want 5 (the limiter's burst)", len(burst), attempts)
	}
	clock.Add(int64(300 * time.Millisecond)) // the limiter lets one more through
	remote, _ := refusedLogin(t, g, ln)
	remotes[remote] = true
	after := logs.TakeAll()
	if len(after) != 1 {
		t.Fatalf("%d log lines for a refused login after the burst, want 1", len(after))
	}
	for _, l := range append(burst, after...) {
		f := l.ContextMap()
		if l.Level != zapcore.WarnLevel || !remotes[f["remote"].(string)] || f["code"] != "UNAUTHENTICATED" {
			t.Fatalf("log line %q %v: want warn with the client's remote address and the code", l.Message, f)
		}
	}
	if s := after[0].ContextMap()["suppressed"].(int64); s != int64(attempts-len(burst)) {
		t.Fatalf("the line after the burst says %d suppressed, want %d", s, attempts-len(burst))
	}
}
