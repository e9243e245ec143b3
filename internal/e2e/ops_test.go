package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/ops"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// httpGet returns the status and the trimmed body of a GET.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// The profiles and the session page (every connected uid and device) are
// not on the ops port (--http), which load balancers and Prometheus reach;
// they are served on --debug-http only, which is off by default.
func TestDebugEndpointsOnlyOnDebugListener(t *testing.T) {
	if def := config.Defaults(); def.DebugHTTPAddr != "" {
		t.Fatalf("--debug-http defaults to %q, want off", def.DebugHTTPAddr)
	}
	db := testenv.Database(t)
	off := testnode.StartNode(t, testnode.Config(t, db), allRoles)
	if off.Debug != nil {
		t.Fatalf("a node without --debug-http serves debug HTTP on %s", off.Debug.Addr())
	}

	cfg := testnode.Config(t, db)
	cfg.DebugHTTPAddr = "127.0.0.1:0"
	n := testnode.StartNode(t, cfg, allRoles)
	dial(t, n, "tcp", 7, "phone")
	debugPaths := []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=2", "/debug/pprof/profile?seconds=1", "/debug/sessions", "/debug/sessions?uid=7"}
	for _, nd := range []*node.Node{off, n} {
		for _, path := range debugPaths {
			if code, _ := httpGet(t, "http://"+nd.Ops.Addr()+path); code != http.StatusNotFound {
				t.Errorf("--http %s: %d, want 404", path, code)
			}
		}
	}

	base := "http://" + n.Debug.Addr()
	if code, body := httpGet(t, base+"/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Errorf("--debug-http /debug/pprof/goroutine: %d %.100q", code, body)
	}
	if code, _ := httpGet(t, base+"/debug/pprof/heap"); code != http.StatusOK {
		t.Errorf("--debug-http /debug/pprof/heap: %d", code)
	}
	code, body := httpGet(t, base+"/debug/sessions?uid=7")
	var sessions []gateway.SessionState
	if err := json.Unmarshal([]byte(body), &sessions); code != http.StatusOK || err != nil {
		t.Fatalf("--debug-http /debug/sessions?uid=7: %d %q (%v)", code, body, err)
	}
	if len(sessions) != 1 || sessions[0].UID != 7 || sessions[0].Device != "phone" {
		t.Fatalf("--debug-http /debug/sessions?uid=7: %+v, want the session of 7/phone", sessions)
	}
}

// A --debug-http other hosts could reach is refused at start, with an error
// naming the flag, before anything listens: the ops port is held by the
// test, so a start that listened before checking would fail on it instead,
// and the addresses are ones this host has no interface for, so that not
// even a broken check binds a non-loopback address.
func TestDebugHTTPOffLoopbackRefused(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	db := testenv.Database(t)
	for _, addr := range []string{"192.0.2.1:0", "[2001:db8::1]:6060"} {
		cfg := testnode.Config(t, db)
		cfg.HTTPAddr = busy.Addr().String()
		cfg.DebugHTTPAddr = addr
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := node.Start(ctx, cfg, allRoles, testenv.Logger(t))
		cancel()
		if err == nil {
			n.Close()
			t.Fatalf("--debug-http %s: the node started", addr)
		}
		if !errors.Is(err, ops.ErrNotLoopback) || !strings.Contains(err.Error(), "--debug-http") {
			t.Errorf("--debug-http %s: start failed with %q, want ErrNotLoopback naming --debug-http", addr, err)
		}
	}
}

// /readyz is 503 while a role is still starting (here the gateway, held
// reading its TLS certificate from a FIFO after the syncer and the fanout
// are up and every readiness check passes), and its listeners do not accept
// yet; once Start has returned it is 200 and they accept. /livez is 200
// throughout.
func TestReadyzWaitsForEveryRole(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t)
	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "cert.pem")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.TLSCert, cfg.TLSKey = fifo, keyFile
	cfg.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	cfg.TCPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	cfg.WSAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))

	type started struct {
		n   *node.Node
		err error
	}
	done := make(chan started, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		n, err := node.Start(ctx, cfg, allRoles, testenv.Logger(t))
		done <- started{n, err}
	}()
	// Whatever happens below, let Start finish and close the node.
	var release sync.Once
	var wfd int = -1
	feed := func() {
		release.Do(func() {
			if wfd < 0 {
				// Start has not opened the FIFO: open it blocking, so that
				// the write waits for the reader.
				f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
				if err != nil {
					return
				}
				_, _ = f.Write(pem)
				f.Close()
				return
			}
			_, _ = syscall.Write(wfd, pem)
			syscall.Close(wfd)
		})
	}
	defer func() {
		go feed() // blocks until the node opens the FIFO, if it ever does
		if s := <-done; s.n != nil {
			s.n.Close()
		}
	}()

	// A non-blocking open for writing succeeds once a reader has the FIFO
	// open: the node is then in startGateway, blocked reading it.
	deadline := time.Now().Add(60 * time.Second)
	for {
		wfd, err = syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.ENXIO) || time.Now().After(deadline) {
			t.Fatalf("the node never read its certificate: %v", err)
		}
		select {
		case s := <-done:
			done <- s
			t.Fatalf("start returned before reading the certificate: %v", s.err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	base := "http://" + cfg.HTTPAddr
	if code, body := httpGet(t, base+"/readyz"); code != http.StatusServiceUnavailable || body != "starting: not every role is up yet" {
		t.Errorf("/readyz while the gateway starts: %d %q, want 503 naming only the start (every check passes)", code, body)
	}
	if code, body := httpGet(t, base+"/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz while the gateway starts: %d %q, want 503", code, body)
	}
	if code, body := httpGet(t, base+"/livez"); code != http.StatusOK {
		t.Errorf("/livez while the gateway starts: %d %q, want 200", code, body)
	}
	for _, addr := range []string{cfg.TCPAddr, cfg.WSAddr} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("gateway listener %s accepts while the gateway starts", addr)
		}
	}

	feed()
	s := <-done
	done <- s
	if s.err != nil {
		t.Fatalf("start: %v", s.err)
	}
	if code, body := httpGet(t, base+"/readyz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/readyz after start: %d %q, want 200 ok", code, body)
	}
	if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz after start: %d %q, want 200 ok", code, body)
	}
	for _, addr := range []string{cfg.TCPAddr, cfg.WSAddr} {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Errorf("gateway listener %s after start: %v", addr, err)
			continue
		}
		c.Close()
	}
}

// At SIGTERM /readyz turns 503 at once while the node goes on serving its
// connections for the drain delay (a connected client's requests are still
// answered); only then are the connections closed and the node stopped.
func TestShutdownUnreadyBeforeConnectionsClose(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.HTTPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	cfg.TCPAddr = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	// Long enough that the checks below run well inside it; the test
	// does not wait it out unless the node is broken.
	cfg.DrainDelay = 10 * time.Second
	signals := make(chan os.Signal, 2)
	ran := make(chan error, 1)
	go func() { ran <- node.Run(cfg, allRoles, testenv.Logger(t), signals) }()
	defer func() {
		select {
		case signals <- syscall.SIGTERM: // cut the drain short if it still runs
		default:
		}
		<-ran
	}()

	base := "http://" + cfg.HTTPAddr
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-ran:
			t.Fatalf("node.Run returned before the node was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("the node did not become ready")
		}
	}
	lost := make(chan error, 16)
	ctx := ctxT(t, 60*time.Second)
	c, err := client.Dial(ctx, client.Options{URL: "tcp://" + cfg.TCPAddr, Token: testenv.Token(t, 1, "phone"),
		OnError: func(err error) {
			select {
			case lost <- err:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	signals <- syscall.SIGTERM
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		code, body := httpGet(t, base+"/readyz")
		if code == http.StatusOK {
			if time.Now().After(deadline) {
				t.Fatal("/readyz still 200 after SIGTERM")
			}
			continue
		}
		if code != http.StatusServiceUnavailable || body != "shutting down" {
			t.Fatalf("/readyz after SIGTERM: %d %q, want 503 shutting down", code, body)
		}
		break
	}
	// Still serving: a moment later the connection is the same one and
	// answers requests.
	time.Sleep(time.Second)
	if code, body := httpGet(t, base+"/livez"); code != http.StatusOK {
		t.Errorf("/livez while draining: %d %q, want 200", code, body)
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, err = c.Summary(rctx)
	cancel()
	if err != nil {
		t.Fatalf("a request while draining: %v", err)
	}
	select {
	case err := <-lost:
		t.Fatalf("the connection was lost while /readyz said shutting down, before the drain delay: %v", err)
	default:
	}

	// Then the gateway closes the connection and the node stops.
	select {
	case err := <-lost:
		t.Logf("after the drain: %v", err)
	case <-time.After(cfg.DrainDelay + 30*time.Second):
		t.Fatal("the connection was not closed after the drain delay")
	}
	select {
	case err := <-ran:
		ran <- err
		if err != nil {
			t.Fatalf("node.Run: %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("node.Run did not return after the shutdown")
	}
}
