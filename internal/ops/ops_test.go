package ops

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// /readyz (and its alias /healthz) is ready only between SetStarted and
// SetDraining, and only while every check passes; its body names what is
// not ready. /livez is 200 throughout.
func TestReadinessStates(t *testing.T) {
	s, err := Listen("127.0.0.1:0", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var postgresDown atomic.Bool
	s.AddCheck(Check{Name: "postgres", Fn: func(context.Context) error {
		if postgresDown.Load() {
			return errors.New("connection refused")
		}
		return nil
	}})
	base := "http://" + s.Addr()
	type want struct {
		code int
		body string
	}
	expect := func(state string, w want) {
		t.Helper()
		for _, path := range []string{"/readyz", "/healthz"} {
			if code, body := get(t, base+path); code != w.code || body != w.body {
				t.Errorf("%s: %s = %d %q, want %d %q", state, path, code, body, w.code, w.body)
			}
		}
		if code, body := get(t, base+"/livez"); code != http.StatusOK || body != "ok" {
			t.Errorf("%s: /livez = %d %q, want 200 ok", state, code, body)
		}
	}

	expect("before SetStarted, checks passing", want{503, notStarted})
	postgresDown.Store(true)
	expect("before SetStarted, a check failing", want{503, notStarted + "\npostgres: connection refused"})
	s.SetStarted()
	expect("started, a check failing", want{503, "postgres: connection refused"})
	postgresDown.Store(false)
	expect("started, checks passing", want{200, "ok"})
	s.SetDraining()
	expect("draining", want{503, shuttingDown})
	s.SetStarted() // a late start does not undo the shutdown
	expect("draining, started again", want{503, shuttingDown})
}

// The ops listener serves neither the profiles nor any other debug page.
func TestOpsServesNoDebugPages(t *testing.T) {
	s, err := Listen("127.0.0.1:0", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1", "/debug/sessions"} {
		if code, _ := get(t, "http://"+s.Addr()+path); code != http.StatusNotFound {
			t.Errorf("ops %s: %d, want 404", path, code)
		}
	}
	if code, _ := get(t, "http://"+s.Addr()+"/metrics"); code != http.StatusOK {
		t.Errorf("ops /metrics: %d, want 200", code)
	}
}

func TestCheckDebugAddr(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:6060", "127.0.0.2:0", "[::1]:6060", "localhost:6060"} {
		if err := CheckDebugAddr(addr); err != nil {
			t.Errorf("%s refused: %v", addr, err)
		}
	}
	for _, addr := range []string{":6060", "0.0.0.0:6060", "[::]:6060", "10.0.0.5:6060", "192.0.2.1:0", "[2001:db8::1]:6060", "debug.example.com:6060", "localhost.example.com:6060"} {
		if err := CheckDebugAddr(addr); !errors.Is(err, ErrNotLoopback) {
			t.Errorf("%s: %v, want ErrNotLoopback", addr, err)
		}
	}
	if err := CheckDebugAddr("127.0.0.1"); err == nil || errors.Is(err, ErrNotLoopback) {
		t.Errorf("no port: %v, want a malformed-address error", err)
	}
}

// ListenDebug itself refuses a non-loopback address (here one no interface
// of this host has, so that nothing is bound even without the check: the
// error then would be the bind's, not ErrNotLoopback).
func TestListenDebugRefusesNonLoopback(t *testing.T) {
	d, err := ListenDebug("192.0.2.1:0")
	if err == nil {
		d.Close()
		t.Fatal("a debug listener on 192.0.2.1 started")
	}
	if !errors.Is(err, ErrNotLoopback) {
		t.Fatalf("ListenDebug(192.0.2.1:0): %v, want ErrNotLoopback", err)
	}
}

// The debug listener serves the profiles and the pages added to it.
func TestDebugServesProfiles(t *testing.T) {
	d, err := ListenDebug("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	d.Handle("/debug/sessions", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "[]") }))
	for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/goroutine?debug=1": "goroutine profile", "/debug/sessions": "[]"} {
		if code, body := get(t, "http://"+d.Addr()+path); code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("debug %s: %d %.80q, want 200 with %q", path, code, body, want)
		}
	}
	// The command line may hold secrets.
	if code, _ := get(t, "http://"+d.Addr()+"/debug/pprof/cmdline"); code == http.StatusOK {
		t.Errorf("debug /debug/pprof/cmdline: 200, want it not served")
	}
}
