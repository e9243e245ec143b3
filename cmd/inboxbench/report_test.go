package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The results table of docs/benchmarks.md is what `inboxbench report`
// makes of the committed results files: a results file added without the
// page, or a page edited by hand, fails here. No servers; milliseconds.
func TestBenchmarksPageIsCurrent(t *testing.T) {
	page, current, err := reportPage("../../docs/benchmarks", "../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(page) != string(current) {
		t.Errorf("docs/benchmarks.md's results table is stale: run go generate ./cmd/inboxbench (inboxbench report --results docs/benchmarks --out docs/benchmarks.md)")
	}
}

// A row shows the runs of the newest build of its command: the newest
// file holding it, every run of that file's last build there, and
// neither the runs of an older build nor those marked tried.
func TestReportTakesTheNewestBuild(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fanout := func(build string, ratio string, extra string) string {
		return `{"build":"` + build + `"` + extra + `,"result":{"scenario":"fanout","group":10,"mode":"all-in-one","ratio":` + ratio +
			`,"entries_per_s":1000,"baseline_publish_per_s":3000}}` + "\n"
	}
	write("results-2026-01-01.jsonl", fanout("old", "0.9", ""))
	write("results-2026-01-02-ab.jsonl", fanout("aaa", "0.1", "")+fanout("bbb", "0.2", "")+fanout("aaa", "0.3", "")+
		fanout("bbb", "0.4", "")+fanout("ccc", "0.8", `,"tried":true`)+`{"note":"no scenario"}`+"\n")
	ms, err := loadResults(dir)
	if err != nil {
		t.Fatal(err)
	}
	table := reportTable(ms)
	row := ""
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, "| `fanout --group 10`") {
			row = l
		}
	}
	if !strings.Contains(row, "| 0.200–0.400 of raw") || !strings.Contains(row, "| 2 | bbb | 2026-01-02 |") {
		t.Errorf("fanout row %q: want the two runs of bbb (0.200–0.400), 2026-01-02", row)
	}
	if !strings.Contains(table, "| `scale` | not measured |") {
		t.Errorf("a command without runs is not marked so:\n%s", table)
	}
	write("results-2026-1-3.jsonl", "")
	if _, err := loadResults(dir); err == nil {
		t.Error("a results file named without its date was accepted")
	}
}
