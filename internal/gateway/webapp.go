package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/auth"
)

// The web client (Options.Web) is served on the WebSocket listener, so
// that the page and its socket share an origin: no CORS, no second port,
// and the page's CSP can allow exactly that host. The listener stays
// gobwas/ws for upgrades; serveWS peeks at the request line and hands a
// request for /app or /app/... to one http.Server through an in-memory
// listener. Such a connection still counts as one before hello until it
// closes (the pre-auth caps), and the HTTP server's timeouts are the
// hello timeout. Keep-alive is off: one request per connection, so a
// browser's idle connections do not hold pre-auth slots.

// appPath is where the web client lives.
const appPath = "/app"

// webApp is the HTTP side of the WebSocket listener.
type webApp struct {
	srv *http.Server
	ln  *connListener
}

func newWebApp(g *Gateway) *webApp {
	if g.opts.Web == nil {
		return nil
	}
	h := &appHandler{files: http.StripPrefix(appPath, http.FileServerFS(g.opts.Web)), devToken: g.opts.DevToken, wsPath: g.opts.WSPath, log: g.log.Named("web")}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: g.opts.HelloTimeout,
		ReadTimeout:       g.opts.HelloTimeout,
		WriteTimeout:      g.opts.HelloTimeout,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          zap.NewStdLog(g.log.Named("web")),
	}
	srv.SetKeepAlivesEnabled(false)
	return &webApp{srv: srv, ln: &connListener{conns: make(chan net.Conn), done: make(chan struct{})}}
}

// run serves until ctx ends, then closes every open HTTP connection.
func (w *webApp) run(ctx context.Context) {
	if w == nil {
		return
	}
	go func() {
		<-ctx.Done()
		w.ln.Close()
		w.srv.Close()
	}()
	_ = w.srv.Serve(w.ln)
}

// serve hands nc, whose request head br has begun to read, to the HTTP
// server; done runs once nc is closed.
func (w *webApp) serve(nc net.Conn, br *bufio.Reader, done func()) {
	c := &appConn{Conn: nc, r: br, done: done}
	select {
	case w.ln.conns <- c:
	case <-w.ln.done:
		c.Close()
	}
}

// isAppRequest reports whether the request line in br (peeked, not
// consumed) asks for appPath or below. A line longer than br's buffer is
// no request for the app (whose paths are short): it goes on to the
// upgrader, which refuses it as before.
func isAppRequest(br *bufio.Reader) bool {
	for {
		// Peek for one byte more than is buffered: a read that returns
		// whatever the client sent so far.
		if _, err := br.Peek(br.Buffered() + 1); err != nil {
			return false
		}
		b, _ := br.Peek(br.Buffered())
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			return isAppPath(b[:i])
		}
		if len(b) == br.Size() {
			return false
		}
	}
}

// isAppPath reads a request line "GET /app/x?y HTTP/1.1".
func isAppPath(line []byte) bool {
	f := bytes.Fields(line)
	if len(f) != 3 {
		return false
	}
	path, _, _ := bytes.Cut(f[1], []byte("?"))
	return string(path) == appPath || bytes.HasPrefix(path, []byte(appPath+"/"))
}

// appConn reads through the reader that peeked at its request line and
// ends its pre-auth count when closed.
type appConn struct {
	net.Conn
	r    *bufio.Reader
	once sync.Once
	done func()
}

func (c *appConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c *appConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.done)
	return err
}

// connListener is a net.Listener of the connections serveWS hands over.
type connListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return &net.TCPAddr{} }

// appHandler serves the files, the page's configuration and, with the
// development secret only, development tokens.
type appHandler struct {
	files http.Handler // the files under appPath

	devToken func(uid int64, device string) (string, time.Time, error)
	wsPath   string
	log      *zap.Logger
}

// hostRE is what a Host header may be to be written into the CSP (a
// name or an IP, a port); anything else gets no explicit ws source.
var hostRE = regexp.MustCompile(`^[A-Za-z0-9.\-]+(:[0-9]+)?$|^\[[0-9A-Fa-f:.]+\](:[0-9]+)?$`)

func (h *appHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	// 'self' only: no CDN, no inline script or style; the socket to this
	// very host (CSP's 'self' covers ws: only in newer browsers, hence
	// the explicit sources).
	connect := "'self'"
	if hostRE.MatchString(r.Host) {
		connect += " ws://" + r.Host + " wss://" + r.Host
	}
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src "+connect+"; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cache-Control", "no-cache")
	if strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		// What the upgrader answered before /app existed.
		http.Error(w, "no websocket endpoint here; use "+h.wsPath, http.StatusNotFound)
		return
	}
	switch r.URL.Path {
	case appPath:
		http.Redirect(w, r, appPath+"/", http.StatusMovedPermanently)
		return
	case appPath + "/config.json":
		h.config(w, r)
		return
	case appPath + "/dev/token":
		if h.devToken != nil {
			h.token(w, r)
			return
		}
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	h.files.ServeHTTP(w, r)
}

// appConfig is /app/config.json: what the page needs to know of this
// gateway.
type appConfig struct {
	// WSPath is the WebSocket path on this host.
	WSPath string `json:"ws_path"`
	// DevTokens says POST /app/dev/token exists (development secret).
	DevTokens bool `json:"dev_tokens"`
}

func (h *appHandler) config(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, appConfig{WSPath: h.wsPath, DevTokens: h.devToken != nil})
}

// devTokenRequest is the body of POST /app/dev/token; uid is a number or
// a decimal string (the protocol's JSON form writes int64 as strings).
type devTokenRequest struct {
	UID    json.Number `json:"uid"`
	Device string      `json:"device"`
}

type devTokenResponse struct {
	Token       string `json:"token"`
	ExpiresAtMS int64  `json:"expires_at_ms"`
}

// token mints a development token. Only JSON bodies: a cross-site form
// cannot send one without a CORS preflight, which this handler never
// grants.
func (h *appHandler) token(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "POST a JSON body {uid, device}", http.StatusMethodNotAllowed)
		return
	}
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) != "application/json" {
		http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
		return
	}
	var req devTokenRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 4<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, fmt.Sprintf("body: %v", err), http.StatusBadRequest)
		return
	}
	uid, err := strconv.ParseInt(req.UID.String(), 10, 64)
	if err != nil || uid <= 0 {
		http.Error(w, fmt.Sprintf("uid %q: must be a positive integer", req.UID), http.StatusBadRequest)
		return
	}
	if req.Device == "" || len(req.Device) > auth.MaxDeviceLen {
		http.Error(w, fmt.Sprintf("device: 1..%d bytes", auth.MaxDeviceLen), http.StatusBadRequest)
		return
	}
	tok, exp, err := h.devToken(uid, req.Device)
	if err != nil {
		h.log.Error("development token", zap.Error(err))
		http.Error(w, "cannot issue a token", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, devTokenResponse{Token: tok, ExpiresAtMS: exp.UnixMilli()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
