package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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
