package main

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// inboxctl user delete --uid U waits until the deletion is complete and
// exits 0, printing the job (state, step, progress) as it moves, the last
// line "done"; run again, it exits 0 at once with the done job, and the
// user's data stays gone.
func TestUserDeleteWaitsUntilDoneAndIsIdempotent(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := strconv.FormatInt(createConv(t, n, 1, 2), 10)
	common := []string{"--nats", n.NC.ConnectedUrl(), "--url", n.Gateway.WSURL(), "--secret", testenv.Secret}
	ctx := context.Background()
	if _, code, _ := runIn(t, ctx, append([]string{"send", "--uid", "1", "--device", "d", "--conv", conv, "--text", "bye", "--count", "3"}, common...)...); code != 0 {
		t.Fatalf("send: exit %d", code)
	}
	out, code, _ := runIn(t, ctx, append([]string{"user", "delete", "--uid", "1"}, common...)...)
	if code != 0 || len(out) < 2 {
		t.Fatalf("user delete: exit %d, %v (want the job as it starts and as it ends)", code, out)
	}
	last := out[len(out)-1]
	progress, _ := last["progress"].(map[string]any)
	if last["state"] != "done" || last["uid"].(float64) != 1 || progress == nil || progress["bodies"].(float64) != 3 ||
		progress["conversations"].(float64) != 1 || out[0]["state"] == "done" {
		t.Fatalf("user delete printed %v; want it to start not done and end done with 3 bodies and 1 membership removed", out)
	}
	for _, l := range out {
		if l["state"] == nil || l["step"] == nil {
			t.Fatalf("line %v has no state or step", l)
		}
	}
	var left int
	if err := n.Store.Pool.QueryRow(ctx, `SELECT count(*) FROM conv_member WHERE uid = 1`).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d memberships of user 1 left (%v)", left, err)
	}

	again, code, took := runIn(t, ctx, append([]string{"user", "delete", "--uid", "1"}, common...)...)
	if code != 0 || len(again) != 1 || again[0]["state"] != "done" || again[0]["finished_at"] != last["finished_at"] {
		t.Fatalf("user delete again: exit %d, %v; want one line, the same done job", code, again)
	}
	if took > 5*time.Second {
		t.Fatalf("user delete of a deleted user took %s; want at once", took)
	}

	if out, code, _ := runIn(t, ctx, append([]string{"user", "delete"}, common...)...); code != 1 || len(out) != 1 || out[0]["error"] == nil {
		t.Fatalf("user delete without --uid: exit %d, %v", code, out)
	}
	if out, code, _ := runIn(t, ctx, append([]string{"user", "frobnicate"}, common...)...); code != 1 || len(out) != 1 || !strings.Contains(out[0]["error"].(string), "delete") {
		t.Fatalf("unknown user command: exit %d, %v", code, out)
	}
}

// usageByName indexes inboxctl usage's lines by kind and name.
func usageByName(t *testing.T, lines []map[string]any) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, l := range lines {
		k, name := l["kind"].(string), l["name"].(string)
		if (k != "stream" && k != "table") || name == "" || l["entries"] == nil || l["bytes"] == nil {
			t.Fatalf("usage line %v: want kind stream or table, name, entries, bytes", l)
		}
		out[k+"/"+name] = l
	}
	return out
}

func num(l map[string]any, field string) float64 {
	f, _ := l[field].(float64)
	return f
}

// inboxctl usage prints a JSON line per stream (SEND and every INBOX
// partition) and per table, with entries, bytes and the oldest entry, and
// exits 0; the figures follow the data: after messages are sent, the
// inbox streams and msg_content hold them, in entries and in bytes, and
// their oldest entry is the first message's time.
func TestUsagePrintsStreamsAndTables(t *testing.T) {
	n := testnode.AllInOne(t)
	common := []string{"--nats", n.NC.ConnectedUrl()}
	ctx := context.Background()
	lines, code, _ := runIn(t, ctx, append([]string{"usage"}, common...)...)
	if code != 0 {
		t.Fatalf("usage: exit %d, %v", code, lines)
	}
	before := usageByName(t, lines)
	partitions := testnode.Layout().InboxPartitions
	want := []string{"stream/SEND", "table/msg_content", "table/inbox_archive", "table/device_cursor", "table/send_reject",
		"table/conversation", "table/conv_member", "table/user_deletion"}
	for p := 0; p < partitions; p++ {
		want = append(want, "stream/INBOX_"+strconv.Itoa(p))
	}
	for _, k := range want {
		if before[k] == nil {
			t.Fatalf("usage has no line %s: %v", k, lines)
		}
	}
	if num(before["table/msg_content"], "entries") != 0 || before["table/msg_content"]["oldest"] != nil {
		t.Fatalf("an empty msg_content: %v", before["table/msg_content"])
	}

	conv := createConv(t, n, 1, 2)
	c, err := client.Dial(ctx, client.Options{URL: n.Gateway.WSURL(), Token: testenv.Token(t, 1, "d")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	var pending []*client.PendingSend
	for i := 0; i < 300; i++ {
		pending = append(pending, c.SendAsync(conv, "u-"+strconv.Itoa(i), strings.Repeat("x", 500)))
	}
	for _, p := range pending {
		if _, err := p.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lines, code, _ = runIn(t, ctx, append([]string{"usage"}, common...)...)
	if code != 0 {
		t.Fatalf("usage: exit %d, %v", code, lines)
	}
	after := usageByName(t, lines)
	var inboxBefore, inboxAfter, inboxBytesBefore, inboxBytesAfter float64
	for p := 0; p < partitions; p++ {
		k := "stream/INBOX_" + strconv.Itoa(p)
		inboxBefore, inboxAfter = inboxBefore+num(before[k], "entries"), inboxAfter+num(after[k], "entries")
		inboxBytesBefore, inboxBytesAfter = inboxBytesBefore+num(before[k], "bytes"), inboxBytesAfter+num(after[k], "bytes")
	}
	if inboxAfter-inboxBefore < 600 || inboxBytesAfter <= inboxBytesBefore {
		t.Fatalf("INBOX streams: %v entries, %v bytes before; %v, %v after 300 messages to 2 members", inboxBefore, inboxBytesBefore, inboxAfter, inboxBytesAfter)
	}
	mc := after["table/msg_content"]
	if num(mc, "entries") != 300 || num(mc, "bytes") <= num(before["table/msg_content"], "bytes") || mc["entries_estimated"] != false {
		t.Fatalf("msg_content after 300 messages: %v (before %v)", mc, before["table/msg_content"])
	}
	oldest, err := time.Parse(time.RFC3339Nano, mc["oldest"].(string))
	if err != nil || oldest.Before(start.Add(-time.Minute)) || oldest.After(time.Now()) {
		t.Fatalf("msg_content oldest %v (%v), want the first message's time", mc["oldest"], err)
	}
	if conv := after["table/conversation"]; num(conv, "entries") != 1 || conv["oldest"] == nil {
		t.Fatalf("conversation: %v", conv)
	}
}
