package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/testenv"
)

// soakContract lists the soak's fields other tooling reads.
var soakContract = []string{"duration_s", "send_rate_start", "send_rate_end", "send_rate_ratio",
	"catchup_start_entries_per_s", "catchup_end_entries_per_s", "catchup_ratio",
	"js_store_bytes_start", "js_store_bytes_end", "pg_database_bytes_start", "pg_database_bytes_end",
	"stored", "lost", "expired", "dup_after_dedupe"}

// buildBench builds inboxbench into a temp dir.
func buildBench(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "inboxbench")
	if out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// benchOutput is what a run of inboxbench wrote.
type benchOutput struct{ stdout, stderr bytes.Buffer }

// runBench builds inboxbench and runs it with args, --json and the test
// Postgres server (--pg), in dir ("": this package's) within timeout. A
// run that fails fails the test with both outputs; so does a test that
// fails later (the outputs are logged then).
func runBench(t *testing.T, timeout time.Duration, dir string, args ...string) *benchOutput {
	t.Helper()
	bin := buildBench(t)
	name := "inboxbench " + strings.Join(args, " ")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(args, "--json", "--pg", testenv.AdminURL())...)
	cmd.Dir = dir
	out := new(benchOutput)
	cmd.Stdout, cmd.Stderr = &out.stdout, &out.stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s took %s", name, time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", name, err, out.stdout.String(), out.stderr.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s\nstdout:\n%s\nstderr:\n%s", name, out.stdout.String(), out.stderr.String())
		}
	})
	return out
}

// TestQuickSoak runs `inboxbench soak --quick` (15 s of sends against a
// system with a 3 s hot window, 8 s retention in 2 s ranges and cleanup
// every second): the JSON carries the contract fields and a sample per
// interval with the disk measured, devices came back in waves and caught
// up, nothing stored was lost or handed over twice, and the lifecycle
// jobs ran (the INBOX streams hold less than what was sent). It asserts
// no speed and no levelling: 15 s says nothing about either.
func TestQuickSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole system")
	}
	plot := t.TempDir()
	stdout := &runBench(t, 3*time.Minute, "", "soak", "--quick", "--plot-data", plot).stdout
	var out soakOut
	var fields map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &fields); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, stdout.String())
	}
	for _, f := range soakContract {
		if _, ok := fields[f].(float64); !ok {
			t.Errorf("field %q missing or not a number: %v", f, fields[f])
		}
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Scenario != "soak" || out.DurationS != 15 {
		t.Errorf("scenario %q, duration %v s: want soak, 15", out.Scenario, out.DurationS)
	}
	if out.Stored == 0 || out.SendRateStart <= 0 || out.SendRateEnd <= 0 || out.CatchupStart <= 0 || out.CatchupEnd <= 0 {
		t.Errorf("stored %d, send rate %v → %v, catch-up %v → %v: want all positive",
			out.Stored, out.SendRateStart, out.SendRateEnd, out.CatchupStart, out.CatchupEnd)
	}
	if out.Lost != 0 || out.Dup != 0 || out.Unexpected != 0 || out.OutOfOrder != 0 {
		t.Errorf("lost %d, dup %d, unexpected %d, out of order %d: want 0 each", out.Lost, out.Dup, out.Unexpected, out.OutOfOrder)
	}
	// 0, 2, …, 14 and the end at 15 s.
	if len(out.Samples) != 9 {
		t.Errorf("%d samples, want 9", len(out.Samples))
	}
	for _, s := range out.Samples {
		if s.JSStoreBytes <= 0 || s.PGDatabaseBytes <= 0 || s.Tables["msg_content"] <= 0 || s.Tables["inbox_archive"] <= 0 {
			t.Errorf("sample at %v s: js %d, pg %d, tables %v: want the disk measured", s.TS, s.JSStoreBytes, s.PGDatabaseBytes, s.Tables)
		}
	}
	var caught int
	for _, w := range out.Waves {
		if w.Entries > 0 && w.Incomplete == 0 {
			caught++
		}
	}
	if caught < 3 {
		t.Errorf("%d waves caught up with a backlog, want at least 3: %+v", caught, out.Waves)
	}
	if end := out.Samples[len(out.Samples)-1]; int64(end.InboxMsgs) >= out.Entries {
		t.Errorf("the INBOX streams hold %d entries at the end of %d sent: the hot window and the cleanup removed nothing", end.InboxMsgs, out.Entries)
	}
	for _, f := range []string{"soak-samples.jsonl", "soak.tsv", "soak-waves.tsv"} {
		if fi, err := os.Stat(filepath.Join(plot, f)); err != nil || fi.Size() == 0 {
			t.Errorf("--plot-data: %s: %v", f, err)
		}
	}
}

// TestQuickSoakPastRetention: devices away (10 s) longer than the
// retention (4 s) come back to messages retention removed. The soak counts
// those as expired, not lost: each device gets every other message, its
// wave finishes (nothing waits for an expired message), and a message
// missing for any other reason (one its device was online for while the
// body existed) would still count as lost.
func TestQuickSoakPastRetention(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole system")
	}
	stdout := &runBench(t, 3*time.Minute, "", "soak", "--quick",
		"--duration", "25s", "--offline", "10s", "--retention", "4s", "--sample-every", "5s").stdout
	var out soakOut
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, stdout.String())
	}
	if out.Lost != 0 || out.Dup != 0 || out.Unexpected != 0 {
		t.Errorf("lost %d, dup %d, unexpected %d: want 0 each", out.Lost, out.Dup, out.Unexpected)
	}
	if out.Expired == 0 {
		t.Errorf("expired 0: devices away 10 s with a 4 s retention found nothing expired")
	}
	var expired int64
	for _, w := range out.Waves {
		if w.Incomplete != 0 {
			t.Errorf("wave back at %v s: %d devices never caught up (waiting for expired messages?)", w.BackS, w.Incomplete)
		}
		expired += w.Expired
	}
	if len(out.Waves) < 2 || expired == 0 {
		t.Errorf("%d waves, %d of their backlog expired: want at least 2 waves and some expired: %+v", len(out.Waves), expired, out.Waves)
	}
}
