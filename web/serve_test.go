package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/web"
)

// devNode starts an all-in-one whose tokens are signed with the
// development secret (loopback only, as the exposure check wants), with
// edit applied to its configuration.
func devNode(t *testing.T, secret string, edit func(*config.Config)) *node.Node {
	t.Helper()
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.TokenSecret = secret
	if edit != nil {
		edit(&cfg)
	}
	return testnode.StartNode(t, cfg, config.RoleAllInOne)
}

// appBase is http://<ws listener> of n.
func appBase(n *node.Node) string {
	u := strings.TrimPrefix(n.Gateway.WSURL(), "ws://")
	return "http://" + strings.TrimSuffix(u, "/ws")
}

var plain = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func get(t *testing.T, url string) (*http.Response, string) {
	t.Helper()
	resp, err := plain.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp, string(b)
}

func TestAppServedBesideWebSocket(t *testing.T) {
	n := devNode(t, auth.DevSecret, nil)
	base := appBase(n)

	resp, body := get(t, base+"/app/")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /app/: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.Contains(body, `<script type="module" src="app.js">`) {
		t.Fatalf("GET /app/ is not the client's index.html:\n%s", body)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	host := strings.TrimPrefix(base, "http://")
	for _, want := range []string{"default-src 'none'", "script-src 'self';", "style-src 'self';", "connect-src 'self' ws://" + host + " wss://" + host + ";", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "http") {
		t.Errorf("CSP %q allows inline code or another origin", csp)
	}
	if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", got)
	}

	if resp, _ := get(t, base+"/app"); resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != "/app/" {
		t.Errorf("GET /app: %d Location %q, want a redirect to /app/", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, base+"/app/style.css"); resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/css") {
		t.Errorf("GET /app/style.css: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp, _ := get(t, base+"/app/app.js"); resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "javascript") {
		t.Errorf("GET /app/app.js: %d %s (a module script needs a JavaScript type)", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp, _ := get(t, base+"/app/no-such-file"); resp.StatusCode != 404 {
		t.Errorf("GET /app/no-such-file: %d", resp.StatusCode)
	}
	// Other paths keep the upgrader's answers.
	if resp, _ := get(t, base+"/elsewhere"); resp.StatusCode != 404 {
		t.Errorf("GET /elsewhere: %d, want the upgrader's 404", resp.StatusCode)
	}
	if resp, _ := get(t, base+"/application"); resp.StatusCode != 404 {
		t.Errorf("GET /application: %d, want the upgrader's 404 (not under /app/)", resp.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, _, err := ws.Dial(ctx, n.Gateway.WSURL())
	if err != nil {
		t.Fatalf("upgrade at /ws: %v", err)
	}
	c.Close()
	_, _, _, err = ws.Dial(ctx, "ws://"+host+"/app/")
	var se ws.StatusError
	if !asStatus(err, &se) || int(se) != 404 {
		t.Errorf("upgrade at /app/: %v, want 404 as at any path but /ws", err)
	}
}

func asStatus(err error, se *ws.StatusError) bool {
	s, ok := err.(ws.StatusError)
	*se = s
	return ok
}

func postToken(t *testing.T, base, contentType, body string) (int, string) {
	t.Helper()
	resp, err := plain.Post(base+"/app/dev/token", contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

type pageConfig struct {
	WSPath    string `json:"ws_path"`
	DevTokens bool   `json:"dev_tokens"`
}

func readConfig(t *testing.T, base string) pageConfig {
	t.Helper()
	resp, body := get(t, base+"/app/config.json")
	var c pageConfig
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &c) != nil {
		t.Fatalf("GET /app/config.json: %d %s", resp.StatusCode, body)
	}
	return c
}

func TestAppDevTokenWithDevelopmentSecret(t *testing.T) {
	n := devNode(t, auth.DevSecret, nil)
	base := appBase(n)
	if c := readConfig(t, base); !c.DevTokens || c.WSPath != "/ws" {
		t.Fatalf("config.json %+v, want dev_tokens and /ws", c)
	}
	status, body := postToken(t, base, "application/json", `{"uid":"42","device":"tab-a"}`)
	if status != 200 {
		t.Fatalf("POST /app/dev/token: %d %s", status, body)
	}
	var r struct {
		Token       string `json:"token"`
		ExpiresAtMS int64  `json:"expires_at_ms"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewHS256Verifier(auth.DevSecret)
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.Verify(r.Token)
	if err != nil || id.UID != 42 || id.Device != "tab-a" {
		t.Fatalf("token verifies as %+v, %v; want uid 42 device tab-a", id, err)
	}
	if d := time.Until(time.UnixMilli(r.ExpiresAtMS)); d < 23*time.Hour || d > 24*time.Hour {
		t.Errorf("expires_at_ms in %s, want the default max ttl (24h)", d)
	}
	for _, bad := range []struct {
		ct, body string
		status   int
	}{
		{"application/json", `{"uid":0,"device":"x"}`, 400},
		{"application/json", `{"uid":"-3","device":"x"}`, 400},
		{"application/json", `{"uid":1,"device":""}`, 400},
		{"application/json", `{"uid":1,"device":"` + strings.Repeat("d", 129) + `"}`, 400},
		{"application/json", `{"uid":1,"device":"x","admin":true}`, 400},
		// A cross-site form post is refused: it cannot send JSON without a
		// preflight.
		{"application/x-www-form-urlencoded", `uid=1&device=x`, 415},
		{"text/plain", `{"uid":1,"device":"x"}`, 415},
	} {
		if status, body := postToken(t, base, bad.ct, bad.body); status != bad.status {
			t.Errorf("POST %s %s: %d %s, want %d", bad.ct, bad.body, status, body, bad.status)
		}
	}
	if resp, _ := get(t, base+"/app/dev/token"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /app/dev/token: %d, want 405", resp.StatusCode)
	}
}

func TestAppDevTokenAbsentWithOtherSecret(t *testing.T) {
	n := devNode(t, testenv.Secret, nil)
	base := appBase(n)
	if c := readConfig(t, base); c.DevTokens {
		t.Fatalf("config.json %+v: dev_tokens with a real secret", c)
	}
	if status, body := postToken(t, base, "application/json", `{"uid":1,"device":"x"}`); status != 404 {
		t.Fatalf("POST /app/dev/token with a real secret: %d %s, want 404", status, body)
	}
	if resp, _ := get(t, base+"/app/"); resp.StatusCode != 200 {
		t.Fatalf("GET /app/ with a real secret: %d (the page takes a pasted token)", resp.StatusCode)
	}
}

func TestAppOff(t *testing.T) {
	n := devNode(t, auth.DevSecret, func(c *config.Config) { c.Web = false })
	base := appBase(n)
	for _, p := range []string{"/app/", "/app/config.json", "/app/index.html"} {
		if resp, _ := get(t, base+p); resp.StatusCode != 404 {
			t.Errorf("--web=false: GET %s: %d, want 404", p, resp.StatusCode)
		}
	}
	if status, _ := postToken(t, base, "application/json", `{"uid":1,"device":"x"}`); status == 200 {
		t.Error("--web=false: POST /app/dev/token issued a token")
	}
}

// A connection to the app counts as one before hello until it closes:
// with a cap of one per IP, a second connection is closed unanswered
// while the first has not finished its request.
func TestAppConnCountsBeforeHello(t *testing.T) {
	n := devNode(t, auth.DevSecret, func(c *config.Config) { c.PreauthConnsPerIP = 1 })
	host := strings.TrimPrefix(appBase(n), "http://")

	a, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := io.WriteString(a, "GET /app/ HTTP/1.1\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let the gateway accept and count it

	b, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(b, "GET /app/ HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = b.SetReadDeadline(time.Now().Add(5 * time.Second))
	if got, err := io.ReadAll(b); len(got) != 0 || isTimeout(err) {
		t.Fatalf("second connection over the cap: read %q, %v; want it closed unanswered", got, err)
	}
	b.Close()

	if _, err := io.WriteString(a, "Host: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(a), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first connection: %v %v", resp, err)
	}
	resp.Body.Close()
	a.Close()

	// Its slot is free once the server closed it (keep-alive is off).
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := plain.Get("http://" + host + "/app/")
		if err == nil && resp.StatusCode == 200 {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the first connection closed: %v %v", resp, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// A connection to the app that does not finish its request within the
// hello timeout is closed, as one that never sends its hello.
func TestAppHelloTimeout(t *testing.T) {
	n := devNode(t, auth.DevSecret, nil)
	const hello = 500 * time.Millisecond
	g := testnode.Gateway(t, n, gateway.Options{HelloTimeout: hello, Web: web.App()})
	host := strings.TrimSuffix(strings.TrimPrefix(g.WSURL(), "ws://"), "/ws")

	for _, partial := range []string{"GET /app/ HTTP/1.1\r\n", "GET /app/ HTTP/1.1\r\nHost: x\r\n"} {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := io.WriteString(c, partial); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * hello))
		_, err = io.ReadAll(c)
		took := time.Since(start)
		c.Close()
		if isTimeout(err) {
			t.Fatalf("%q: still open after %s (hello timeout %s)", partial, took, hello)
		}
		if took < hello/2 {
			t.Fatalf("%q: closed after %s, before the hello timeout %s", partial, took, hello)
		}
	}
	// A whole request is answered.
	if resp, _ := get(t, "http://"+host+"/app/"); resp.StatusCode != 200 {
		t.Fatalf("GET /app/: %d", resp.StatusCode)
	}
}
