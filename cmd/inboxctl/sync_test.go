package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// A sync line says late only for a message flagged Late; every other line
// keeps exactly the seven fields tooling parses (TestSyncContract).
func TestSyncLineLate(t *testing.T) {
	m := client.Message{Seq: 9, MsgID: 1003, ConvID: 1, ConvSeq: 3, SenderUID: 5, Text: "x", Lane: "live"}
	keys := func(m client.Message) map[string]any {
		b, err := json.Marshal(lineOf(m))
		if err != nil {
			t.Fatal(err)
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	in := keys(m)
	want := map[string]any{"seq": 9.0, "msg_id": 1003.0, "conv_id": 1.0, "conv_seq": 3.0, "sender_uid": 5.0, "text": "x", "lane": "live"}
	if len(in) != len(want) {
		t.Fatalf("in-order line %v, want exactly %v", in, want)
	}
	for k, v := range want {
		if in[k] != v {
			t.Fatalf("in-order line %v, want %v", in, want)
		}
	}
	m.Late = true
	late := keys(m)
	if late["late"] != true || len(late) != len(want)+1 {
		t.Fatalf("late line %v, want the same fields and late:true", late)
	}
}

// A sync whose device logs in elsewhere stops at once with an error line
// (code SESSION_REPLACED) and a non-zero exit, instead of idling on a lost
// session (or, before the client stopped on replacement, taking it back).
func TestSyncStopsWhenReplaced(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "inboxctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	n := testnode.AllInOne(t)
	cmd := exec.Command(bin, "sync", "--uid", "2", "--device", "d", "--idle", "60s",
		"--url", "tcp://"+n.Gateway.TCPAddr(), "--secret", testenv.Secret)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var exit error
	exited := make(chan struct{})
	go func() {
		exit = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	for len(n.Gateway.Sessions(2)) == 0 { // the sync is logged in
		select {
		case <-exited:
			t.Fatalf("sync exited before it logged in: %v, %q", exit, stdout.String())
		case <-time.After(20 * time.Millisecond):
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, 2, "d")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		t.Fatal("sync still runs 15s after its device logged in elsewhere")
	}
	ee, ok := exit.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("sync exited with %v, want exit status 1", exit)
	}
	var line map[string]any
	if err := json.Unmarshal([]byte(strings.TrimSpace(stdout.String())), &line); err != nil ||
		line["code"] != "SESSION_REPLACED" || line["error"] == nil {
		t.Fatalf("sync printed %q, want one error line with code SESSION_REPLACED", stdout.String())
	}
}
