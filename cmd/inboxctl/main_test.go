package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// The CLI is a contract other tooling parses: build the real binary and
// check its output field by field.
func TestCLIContract(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "inboxctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	n := testnode.AllInOne(t)
	common := []string{"--nats", n.NC.ConnectedUrl(), "--url", n.Gateway.WSURL(), "--secret", testenv.Secret}
	run := func(args ...string) ([]map[string]any, int) {
		t.Helper()
		flags := common
		if slices.Contains(args, "--url") {
			flags = slices.Delete(slices.Clone(common), 2, 4) // the test's own --url wins
		}
		cmd := exec.Command(bin, append(args, flags...)...)
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%v: output line %q is not JSON", args, l)
			}
			lines = append(lines, m)
		}
		return lines, code
	}

	out, code := run("conv", "create", "--members", "1,2,3", "--group")
	if code != 0 || len(out) != 1 || len(out[0]) != 1 || out[0]["conv_id"] == nil {
		t.Fatalf("conv create: exit %d, %v (want exactly {\"conv_id\":N})", code, out)
	}
	conv := strconv.FormatInt(int64(out[0]["conv_id"].(float64)), 10)

	sent, code := run("send", "--uid", "1", "--device", "d1", "--conv", conv, "--text", "hi", "--count", "3", "--client-msg-id", "cli")
	if code != 0 || len(sent) != 3 {
		t.Fatalf("send: exit %d, %v", code, sent)
	}
	for i, l := range sent {
		if len(l) != 4 || l["client_msg_id"] != "cli-"+strconv.Itoa(i+1) || l["status"] != "STORED" ||
			l["conv_seq"].(float64) != float64(i+1) || l["msg_id"].(float64) <= 0 {
			t.Fatalf("send line %d: %v", i, l)
		}
	}
	// The same ids again: the same answers, nothing new stored.
	again, code := run("send", "--uid", "1", "--device", "d1", "--conv", conv, "--text", "hi", "--count", "3", "--client-msg-id", "cli")
	if code != 0 {
		t.Fatalf("resend: exit %d", code)
	}
	for i := range sent {
		if again[i]["msg_id"] != sent[i]["msg_id"] || again[i]["conv_seq"] != sent[i]["conv_seq"] {
			t.Fatalf("resend line %d: %v, first %v", i, again[i], sent[i])
		}
	}
	// Over raw TCP too.
	tcp, code := run("send", "--uid", "2", "--device", "d2", "--conv", conv, "--text", "over tcp", "--url", "tcp://"+n.Gateway.TCPAddr())
	if code != 0 || len(tcp) != 1 || tcp[0]["conv_seq"].(float64) != 4 {
		t.Fatalf("send over tcp: exit %d, %v", code, tcp)
	}

	bad, code := run("send", "--uid", "77", "--device", "x", "--conv", conv, "--text", "nope")
	if code == 0 || len(bad) != 1 || bad[0]["code"] != "NOT_MEMBER" || bad[0]["error"] == nil {
		t.Fatalf("non-member: exit %d, %v", code, bad)
	}
}

// inboxctl sync prints what the client package hands over and confirms it;
// --max confirms only what it printed; --no-ack confirms nothing.
func TestSyncContract(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "inboxctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	n := testnode.AllInOne(t)
	common := []string{"--nats", n.NC.ConnectedUrl(), "--url", n.Gateway.WSURL(), "--secret", testenv.Secret}
	run := func(args ...string) []map[string]any {
		t.Helper()
		out, err := exec.Command(bin, append(args, common...)...).Output()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var lines []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("%q is not JSON", l)
			}
			lines = append(lines, m)
		}
		return lines
	}
	conv := strconv.FormatInt(int64(run("conv", "create", "--members", "1,2")[0]["conv_id"].(float64)), 10)
	run("send", "--uid", "1", "--device", "a", "--conv", conv, "--text", "hi", "--count", "10", "--client-msg-id", "s")

	none := run("sync", "--uid", "2", "--device", "d", "--idle", "1s", "--no-ack")
	if len(none) != 10 {
		t.Fatalf("--no-ack printed %d lines, want 10", len(none))
	}
	first := run("sync", "--uid", "2", "--device", "d", "--idle", "1s", "--max", "4")
	if len(first) != 4 {
		t.Fatalf("--max 4 printed %d lines", len(first))
	}
	for i, l := range first {
		if len(l) != 7 || l["conv_seq"].(float64) != float64(i+1) || l["sender_uid"].(float64) != 1 ||
			l["lane"] != "backfill" || l["text"] != "hi #"+strconv.Itoa(i+1) || l["seq"] == nil || l["msg_id"] == nil || l["conv_id"] == nil {
			t.Fatalf("line %d: %v", i, l)
		}
	}
	rest := run("sync", "--uid", "2", "--device", "d", "--idle", "1s")
	if len(rest) != 6 || rest[0]["conv_seq"].(float64) != 5 {
		t.Fatalf("after --max 4 the next sync printed %v", rest)
	}
	if again := run("sync", "--uid", "2", "--device", "d", "--idle", "500ms"); len(again) != 0 {
		t.Fatalf("a confirmed inbox printed %d lines again", len(again))
	}
	// trace: one line per recipient and device.
	time.Sleep(1500 * time.Millisecond) // the device cursor mirror is written once a second
	msgID := strconv.FormatInt(int64(rest[5]["msg_id"].(float64)), 10)
	tr := run("trace", msgID)
	statuses := map[string]string{}
	for _, l := range tr {
		statuses[fmt.Sprint(l["uid"], "/", l["device"])] = l["status"].(string)
	}
	if statuses["2/d"] != "DELIVERED" {
		t.Fatalf("trace %s: %v", msgID, tr)
	}
}

// runIn runs the inboxctl command args in this process (its function, as
// main calls it) with ctx and returns its JSON lines, its exit code and how
// long it took.
func runIn(t *testing.T, ctx context.Context, args ...string) ([]map[string]any, int, time.Duration) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w // emit prints there; the commands run one at a time in this package's tests
	out := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		out <- b
	}()
	start := time.Now()
	code := run(ctx, args)
	took := time.Since(start)
	os.Stdout = stdout
	w.Close()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(string(<-out)), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: output line %q is not JSON", args, l)
		}
		lines = append(lines, m)
	}
	return lines, code, took
}

// A text over the limit is refused at once with the limit's words, as a new
// user would try it: 20,000 characters (a frame the gateway reads, then
// rejects) and 70,000 (a frame above the gateway's 64 KiB max_frame, which
// closed the connection, so that the client reconnected and sent it again
// until --timeout, 60 s, and printed "context deadline exceeded"). Nothing
// is stored.
func TestSendTooLongTextRefusedAtOnce(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := strconv.FormatInt(createConv(t, n, 1, 2), 10)
	for _, url := range []string{n.Gateway.WSURL(), "tcp://" + n.Gateway.TCPAddr()} {
		for _, chars := range []int{20_000, 70_000} {
			// Well below the command's own 60 s: the test fails, not hangs, on a retry loop.
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			out, code, took := runIn(t, ctx, "send", "--uid", "1", "--device", "d", "--conv", conv,
				"--text", strings.Repeat("x", chars), "--client-msg-id", fmt.Sprintf("long-%d", chars),
				"--url", url, "--secret", testenv.Secret)
			cancel()
			if code != 1 || len(out) != 1 || out[0]["code"] != "INVALID_ARGUMENT" ||
				out[0]["error"] != "text exceeds 16384 bytes" || out[0]["status"] != "REJECTED" {
				t.Fatalf("%s, %d characters: exit %d after %s, %v; want one line {code: INVALID_ARGUMENT, error: text exceeds 16384 bytes, status: REJECTED}",
					url, chars, code, took.Round(time.Millisecond), out)
			}
			if took > 5*time.Second { // generous: "at once", not after retries
				t.Fatalf("%s, %d characters: refused after %s", url, chars, took)
			}
		}
	}
	var stored int
	if err := n.Store.Pool.QueryRow(context.Background(), `SELECT count(*) FROM msg_content`).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("%d messages stored (%v)", stored, err)
	}
}

func createConv(t *testing.T, n *node.Node, members ...int64) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := (&admin.Client{NC: testnode.Admin(t, n)}).CreateConv(ctx, admin.CreateConvRequest{Members: members})
	if err != nil {
		t.Fatal(err)
	}
	return r.ConvID
}
