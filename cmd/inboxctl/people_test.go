package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// buildCLI builds the real inboxctl binary.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "inboxctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// backlog sends count messages from uid 1 to uid 2 in a new conversation,
// pipelined, and returns their msg_ids in order.
func backlog(t *testing.T, n *node.Node, count int) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conv, err := (&admin.Client{NC: testnode.Admin(t, n)}).CreateConv(ctx, admin.CreateConvRequest{Members: []int64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, 1, "sender")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ids []int64
	var window []*client.PendingSend
	flush := func(k int) {
		for len(window) > k {
			r, err := window[0].Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.MsgID)
			window = window[1:]
		}
	}
	for i := 0; i < count; i++ {
		flush(255)
		window = append(window, c.SendAsync(conv.ConvID, "b-"+strconv.Itoa(i), "backlog "+strconv.Itoa(i)))
	}
	flush(0)
	return ids
}

// syncLines parses sync's stdout: every line must be a sync line with the
// contract's fields (or, last, an error line).
func syncLines(t *testing.T, out string) (lines []syncLine, errLine map[string]any) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("stdout line %q is not JSON", l)
		}
		if _, ok := m["error"]; ok {
			errLine = m
			continue
		}
		for _, k := range []string{"seq", "msg_id", "conv_id", "conv_seq", "sender_uid", "text", "lane"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("stdout line %q lacks %s", l, k)
			}
		}
		var s syncLine
		_ = json.Unmarshal([]byte(l), &s)
		lines = append(lines, s)
	}
	return lines, errLine
}

// With stderr on a terminal (a pty), sync draws a progress bar there
// (printed of pending, rate, ETA) and its stdout is the same JSON lines;
// with stderr on a pipe, stderr stays empty.
func TestSyncProgressBar(t *testing.T) {
	bin := buildCLI(t)
	n := testnode.AllInOne(t)
	const total = 1500
	backlog(t, n, total)
	args := func(device string) []string {
		return []string{"sync", "--uid", "2", "--device", device, "--idle", "1s", "--kind", "mobile",
			"--url", "tcp://" + n.Gateway.TCPAddr(), "--secret", testenv.Secret}
	}

	t.Run("terminal", func(t *testing.T) {
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer ptmx.Close()
		cmd := exec.Command(bin, args("tty")...)
		var stdout bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, tty
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tty.Close() // the child holds it
		var screen bytes.Buffer
		copied := make(chan struct{})
		go func() {
			_, _ = io.Copy(&screen, ptmx) // ends with EIO once the child exits
			close(copied)
		}()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("sync: %v", err)
		}
		select {
		case <-copied:
		case <-time.After(5 * time.Second):
		}
		lines, errLine := syncLines(t, stdout.String())
		if len(lines) != total || errLine != nil {
			t.Fatalf("stdout: %d sync lines (want %d), error line %v", len(lines), total, errLine)
		}
		s := screen.String()
		for _, want := range []string{"[", fmt.Sprintf("/%d", total), "msg/s", "ETA", fmt.Sprintf("%d/%d", total, total), "100%"} {
			if !strings.Contains(s, want) {
				t.Fatalf("the terminal shows no %q: %q", want, tail(s, 400))
			}
		}
		if strings.Contains(s, `"msg_id"`) {
			t.Fatal("JSON lines went to the terminal on stderr")
		}
	})
	t.Run("not a terminal", func(t *testing.T) {
		backlog(t, n, 50)
		cmd := exec.Command(bin, args("pipe")...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("sync: %v", err)
		}
		if lines, _ := syncLines(t, stdout.String()); len(lines) < 50 {
			t.Fatalf("%d sync lines, want the new device's window (at least the newest 50)", len(lines))
		}
		if stderr.Len() != 0 {
			t.Fatalf("stderr of a sync without a terminal: %q", tail(stderr.String(), 200))
		}
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Ctrl-C during a long sync: the process exits non-zero (130, with an
// INTERRUPTED error line) after confirming exactly what it printed: the
// device's cursor is the last printed seq, and the next sync prints the
// rest, nothing of it twice and nothing skipped.
func TestSyncInterruptConfirmsWhatWasPrinted(t *testing.T) {
	bin := buildCLI(t)
	n := testnode.AllInOne(t)
	const total = 4000
	ids := backlog(t, n, total)
	args := []string{"sync", "--uid", "2", "--device", "ctrl-c", "--idle", "30s", "--kind", "mobile",
		"--url", "tcp://" + n.Gateway.TCPAddr(), "--secret", testenv.Secret}

	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var printed bytes.Buffer
	r := bufio.NewReader(out)
	for i := 0; i < 300; i++ { // well into the backlog (mobile: 2,000 msg/s)
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %d lines: %v", i, err)
		}
		printed.WriteString(l)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(r)
	printed.Write(rest)
	err = cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 {
		t.Fatalf("exit after SIGINT: %v, want status 130", err)
	}
	lines, errLine := syncLines(t, printed.String())
	if errLine == nil || errLine["code"] != "INTERRUPTED" {
		t.Fatalf("no INTERRUPTED error line: %v", errLine)
	}
	if len(lines) >= total {
		t.Fatalf("all %d messages were printed before the signal: nothing was interrupted", len(lines))
	}
	for i, l := range lines {
		if l.MsgID != ids[i] {
			t.Fatalf("line %d is msg %d, want %d", i, l.MsgID, ids[i])
		}
	}
	lastSeq := lines[len(lines)-1].Seq
	deadline := time.Now().Add(15 * time.Second)
	for {
		var ack int64
		err := n.Store.Pool.QueryRow(context.Background(), `SELECT ack_seq FROM device_cursor WHERE uid = 2 AND device = 'ctrl-c'`).Scan(&ack)
		if err == nil && uint64(ack) == lastSeq {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the device's cursor is %d (%v), want the last printed seq %d (%d lines printed)", ack, err, lastSeq, len(lines))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The next sync starts right after what was printed.
	var again bytes.Buffer
	next := exec.Command(bin, append(args[:5:5], "--idle", "2s", "--url", "tcp://"+n.Gateway.TCPAddr(), "--secret", testenv.Secret)...)
	next.Stdout = &again
	if err := next.Run(); err != nil {
		t.Fatal(err)
	}
	more, _ := syncLines(t, again.String())
	if len(lines)+len(more) != total || more[0].MsgID != ids[len(lines)] {
		t.Fatalf("the interrupted sync printed %d, the next %d (first msg %d), want %d in all, the next from msg %d",
			len(lines), len(more), more[0].MsgID, total, ids[len(lines)])
	}
}

// Against a gateway that holds only an Ed25519 public key (no HS256
// secret), inboxctl token --key and sync --key sign with the private key
// and log in; an HS256 token (--secret) is refused.
func TestEdDSAOnlyGateway(t *testing.T) {
	bin := buildCLI(t)
	pub, priv, _ := ed25519.GenerateKey(nil)
	dir := t.TempDir()
	pubDER, _ := x509.MarshalPKIXPublicKey(pub)
	privDER, _ := x509.MarshalPKCS8PrivateKey(priv)
	pubFile, keyFile := filepath.Join(dir, "tokens.pub"), filepath.Join(dir, "tokens.key")
	if err := os.WriteFile(pubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.TokenSecret, cfg.TokenEdKeyFile = "", pubFile
	n := testnode.StartNode(t, cfg, config.RoleAllInOne)
	ids := backlog2(t, n, priv, 3)

	// token --key: a client logs in with it.
	out, err := exec.Command(bin, "token", "--uid", "2", "--device", "cli", "--key", keyFile).Output()
	if err != nil {
		t.Fatalf("token --key: %v", err)
	}
	var tok struct{ Token string }
	if err := json.Unmarshal(out, &tok); err != nil || tok.Token == "" {
		t.Fatalf("token output %q: %v", out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: tok.Token})
	if err != nil {
		t.Fatalf("login with inboxctl token --key: %v", err)
	}
	c.Close()

	// sync --key prints the device's messages.
	var stdout bytes.Buffer
	cmd := exec.Command(bin, "sync", "--uid", "2", "--device", "phone", "--idle", "1s", "--key", keyFile,
		"--url", "tcp://"+n.Gateway.TCPAddr())
	cmd.Stdout = &stdout
	if err := cmd.Run(); err != nil {
		t.Fatalf("sync --key: %v, %q", err, stdout.String())
	}
	lines, _ := syncLines(t, stdout.String())
	if len(lines) != len(ids) {
		t.Fatalf("sync --key printed %d messages, want %d", len(lines), len(ids))
	}
	// The development HS256 secret is refused by this gateway.
	cmd = exec.Command(bin, "sync", "--uid", "2", "--device", "phone2", "--idle", "1s", "--url", "tcp://"+n.Gateway.TCPAddr())
	stdout.Reset()
	cmd.Stdout = &stdout
	if err := cmd.Run(); err == nil || !strings.Contains(stdout.String(), "UNAUTHENTICATED") {
		t.Fatalf("sync with an HS256 token against an EdDSA-only gateway: %v, %q", err, stdout.String())
	}
	// A key that is not an Ed25519 private key is a clear error.
	if out, err := exec.Command(bin, "token", "--uid", "2", "--device", "cli", "--key", pubFile).Output(); err == nil || !strings.Contains(string(out), "PRIVATE KEY") {
		t.Fatalf("token --key with a public key: %v, %q", err, out)
	}
}

// backlog2 is backlog for a gateway that takes EdDSA tokens only.
func backlog2(t *testing.T, n *node.Node, priv ed25519.PrivateKey, count int) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conv, err := (&admin.Client{NC: testnode.Admin(t, n)}).CreateConv(ctx, admin.CreateConvRequest{Members: []int64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := auth.NewEdSigner(priv).Issue(1, "sender", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ids []int64
	for i := 0; i < count; i++ {
		r, err := c.Send(ctx, conv.ConvID, "e-"+strconv.Itoa(i), "eddsa "+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.MsgID)
	}
	return ids
}

// --human prints conv show, trace and audit as tables with the same
// fields as their JSON, for people.
func TestHumanTables(t *testing.T) {
	bin := buildCLI(t)
	n := testnode.AllInOne(t)
	ids := backlog(t, n, 3)
	common := []string{"--nats", n.NC.ConnectedUrl(), "--url", "tcp://" + n.Gateway.TCPAddr(), "--secret", testenv.Secret}
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append(args, common...)...).Output()
		if err != nil {
			t.Fatalf("%v: %v, %q", args, err, out)
		}
		if json.Valid(bytes.TrimSpace(out)) && len(bytes.TrimSpace(out)) > 0 && bytes.TrimSpace(out)[0] == '{' {
			t.Fatalf("%v printed JSON: %q", args, out)
		}
		return string(out)
	}
	has := func(what, out string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Fatalf("%s: no %q in\n%s", what, w, out)
			}
		}
	}
	// The device that will not confirm: connected, prints nothing.
	if err := exec.Command(bin, append([]string{"sync", "--uid", "2", "--device", "lazy", "--idle", "500ms", "--no-ack"}, common...)...).Run(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var k int
		if err := n.Store.Pool.QueryRow(context.Background(), `SELECT count(*) FROM device_cursor WHERE uid = 2 AND device = 'lazy'`).Scan(&k); err != nil {
			t.Fatal(err)
		}
		if k == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the device's cursor row was never written")
		}
	}
	var conv int64
	if err := n.Store.Pool.QueryRow(context.Background(), `SELECT conv_id FROM msg_content WHERE msg_id = $1`, ids[0]).Scan(&conv); err != nil {
		t.Fatal(err)
	}
	show := run("conv", "show", "--conv", strconv.FormatInt(conv, 10), "--human")
	has("conv show", show, "conversation", strconv.FormatInt(conv, 10), "direct", "last conv_seq", "3", "UID", "ROLE", "READ", "UNREAD")
	trace := run("trace", strconv.FormatInt(ids[2], 10), "--human")
	has("trace", trace, "MSG_ID", "STATUS", "CURSOR", strconv.FormatInt(ids[2], 10), "lazy", "STORED")
	deadline := time.Now().Add(15 * time.Second)
	for {
		audit := run("audit", "--older-than", "1ms", "--human")
		if strings.Contains(audit, "lazy") {
			has("audit", audit, "UID", "DEVICE", "MSG_ID", "BEHIND", "LAST_SEEN_AT", strconv.FormatInt(ids[0], 10))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("audit never listed the device that did not confirm:\n%s", audit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
