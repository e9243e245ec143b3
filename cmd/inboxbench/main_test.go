package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// contract lists the fields other tooling reads from each scenario's JSON.
var contract = map[string][]string{
	"fanout": {"entries_per_s", "msgs_per_s", "baseline_publish_per_s", "ratio"},
	"storm":  {"users", "backlog", "drain_s", "msgs_per_s", "first_page_p99_ms", "baseline_msgs_per_s", "ratio", "lost", "dup_after_dedupe"},
	"live":   {"idle_p50_ms", "idle_p99_ms", "storm_p50_ms", "storm_p99_ms", "storm_max_ms", "lost"},
	"conns":  {"connections", "rss_bytes_per_conn", "go_heap_bytes_per_conn", "handshakes_per_s"},
	"scale":  {"drain_ms_small", "drain_ms_large", "ratio"},
}

// TestQuickScenarios builds inboxbench and runs every scenario in quick
// mode against real systems it starts (separate server and worker
// processes, a fresh Postgres database each): it keeps the tool working.
// It checks the JSON contract and correctness (nothing lost, nothing
// duplicated), never speed.
func TestQuickScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("starts whole systems")
	}
	profDir := t.TempDir()
	out := runBench(t, 4*time.Minute, "", "all", "--quick", "--profile", profDir)
	got := map[string]map[string]any{}
	sc := bufio.NewScanner(&out.stdout)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not a JSON object: %q: %v", sc.Text(), err)
		}
		name, _ := m["scenario"].(string)
		got[name] = m
		t.Logf("%s", sc.Text())
	}
	num := func(scenario, field string) float64 {
		t.Helper()
		v, ok := got[scenario][field].(float64)
		if !ok {
			t.Errorf("%s: field %q missing or not a number: %v", scenario, field, got[scenario][field])
		}
		return v
	}
	for scenario, fields := range contract {
		if got[scenario] == nil {
			t.Errorf("no %s result", scenario)
			continue
		}
		for _, f := range fields {
			num(scenario, f)
		}
	}
	if t.Failed() {
		return
	}
	positive := func(scenario string, fields ...string) {
		t.Helper()
		for _, f := range fields {
			if v := num(scenario, f); v <= 0 {
				t.Errorf("%s: %s = %v, want > 0", scenario, f, v)
			}
		}
	}
	zero := func(scenario string, fields ...string) {
		t.Helper()
		for _, f := range fields {
			if v := num(scenario, f); v != 0 {
				t.Errorf("%s: %s = %v, want 0", scenario, f, v)
			}
		}
	}
	positive("fanout", "entries_per_s", "msgs_per_s", "baseline_publish_per_s", "ratio")
	positive("storm", "drain_s", "msgs_per_s", "first_page_p99_ms", "baseline_msgs_per_s", "ratio")
	zero("storm", "lost", "dup_after_dedupe", "unexpected", "baseline_lost")
	if num("storm", "users") != 60 || num("storm", "backlog") != 20 {
		t.Errorf("storm: users/backlog %v/%v, want the quick 60/20", num("storm", "users"), num("storm", "backlog"))
	}
	positive("live", "idle_p50_ms", "idle_p99_ms", "idle_msgs")
	zero("live", "lost", "storm_lost", "dup_after_dedupe")
	if num("live", "idle_p99_ms") < num("live", "idle_p50_ms") || num("live", "storm_max_ms") < num("live", "storm_p99_ms") {
		t.Errorf("live: percentiles out of order: %v", got["live"])
	}
	positive("conns", "handshakes_per_s")
	if c := num("conns", "connections"); c != 200 {
		t.Errorf("conns: %v connections, want 200", c)
	}
	positive("scale", "drain_ms_small", "drain_ms_large", "ratio")
	// --profile: storm and live save the gateway's /metrics text (the
	// all-in-one process holds the gateway).
	for _, scenario := range []string{"storm", "live"} {
		b, err := os.ReadFile(filepath.Join(profDir, scenario+"-inboxd-metrics.txt"))
		if err != nil {
			t.Errorf("%s --profile: %v", scenario, err)
			continue
		}
		for _, name := range []string{"inboxd_gateway_consumer_requests_total{op=\"fetch\"}", "inboxd_gateway_backfill_page_read_seconds_bucket"} {
			if !bytes.Contains(b, []byte(name)) {
				t.Errorf("%s --profile: the saved metrics have no %s", scenario, name)
			}
		}
	}
	// live also profiles its idle window and saves the counters at the
	// start of each phase.
	for _, f := range []string{"idle/inboxd-cpu.pb.gz", "live-idle-start-inboxd-metrics.txt", "live-before-storm-inboxd-metrics.txt"} {
		if st, err := os.Stat(filepath.Join(profDir, f)); err != nil || st.Size() == 0 {
			t.Errorf("live --profile: %s missing or empty (%v)", f, err)
		}
	}
	if os.Getenv("INBOXBENCH_TEST_VERBOSE") != "" {
		t.Logf("stderr:\n%s", out.stderr.String())
	}
}

// Without --profile, live profiles nothing: it once profiled its idle
// window all the same (CPU profiling beside the figures it measures) and
// wrote the profile into ./idle of whatever directory it ran in.
func TestLiveWithoutProfileWritesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole system")
	}
	cwd := t.TempDir()
	runBench(t, 2*time.Minute, cwd, "live", "--quick")
	left, err := os.ReadDir(cwd)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("inboxbench live without --profile left %s in its working directory", e.Name())
	}
}
