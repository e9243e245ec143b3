package main

// inboxbench report: the results table of docs/benchmarks.md, rewritten
// from the JSON lines the scenarios print (docs/benchmarks/*.jsonl).
//
//go:generate go run . report --results ../../docs/benchmarks --out ../../docs/benchmarks.md

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/inboxd/inboxd/internal/docmarks"
)

// reportMarks names the generated part of docs/benchmarks.md.
const reportMarks = "results"

// resultsName is how a results file is named: its date first, so that
// newer files sort after older ones, then what was measured.
var resultsName = regexp.MustCompile(`^results-(\d{4}-\d{2}-\d{2})(?:-[a-z0-9-]+)?\.jsonl$`)

// measurement is one JSON line of a results file: a scenario's output
// (the line itself, or its "result" member), with what the line says
// about the run beside it.
type measurement struct {
	res   map[string]any
	build string // "build", else "commit": the code measured
	file  string
	date  string // from the file's name
	line  int
}

// loadResults reads every results file of dir, oldest first (by the date
// in its name, then its name), each in the order of its lines. It passes
// over lines without a scenario (notes), quick runs, and runs marked
// "tried": true (a change measured and not kept).
func loadResults(dir string) ([]measurement, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type file struct{ name, date string }
	var files []file
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".jsonl") {
			continue
		}
		m := resultsName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("%s: a results file is named results-YYYY-MM-DD[-what].jsonl", e.Name())
		}
		files = append(files, file{e.Name(), m[1]})
	}
	sort.Slice(files, func(i, j int) bool {
		if files[i].date != files[j].date {
			return files[i].date < files[j].date
		}
		return files[i].name < files[j].name
	})
	var out []measurement
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(nil, 64<<20) // a soak's line carries every sample
		for n := 1; sc.Scan(); n++ {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			var line map[string]any
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", f.name, n, err)
			}
			res := line
			if r, ok := line["result"].(map[string]any); ok {
				res = r
			}
			if _, ok := res["scenario"].(string); !ok || res["quick"] == true || line["tried"] == true {
				continue
			}
			build, _ := line["build"].(string)
			if build == "" {
				build, _ = line["commit"].(string)
			}
			out = append(out, measurement{res: res, build: build, file: f.name, date: f.date, line: n})
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return out, nil
}

// resultRow is a row of the table: a command and how its figures read.
type resultRow struct {
	command string
	match   func(r map[string]any) bool
	figures func(rs []map[string]any) string
	lost    []string // the fields that count losses and duplicates, summed
}

// resultRows are the table's rows, in its order: the commands of the
// matrix in docs/benchmarks.md.
var resultRows = []resultRow{
	{"fanout --group 10", fanoutOf(10), fanoutFigures, nil},
	{"fanout --group 100", fanoutOf(100), fanoutFigures, nil},
	{"storm --users 300 --backlog 200", stormOf(300, 200), stormFigures, stormLost},
	{"storm --users 3000 --backlog 200", stormOf(3000, 200), stormFigures, stormLost},
	{"storm --users 9000 --backlog 200", stormOf(9000, 200), stormFigures, stormLost},
	{"storm --users 10000 --backlog 200", stormOf(10000, 200), stormFigures, stormLost},
	{"live --users 300 --backlog 10 --idle 20s", liveOf(300, 10, 20), liveFigures, liveLost},
	{"live --users 3000 --backlog 200", liveOf(3000, 200, 10), liveFigures, liveLost},
	{"live --users 10000 --backlog 200", liveOf(10000, 200, 10), liveFigures, liveLost},
	{"conns --n 19000", connsOf(19000), connsFigures, nil},
	{"scale", scenario("scale"), scaleFigures, nil},
	{"soak --duration 10m --hot-window 1m --retention 5m", soakOf(60, 300), soakFigures, soakLost},
	{"soak --duration 10m --hot-window 0 --retention 0 --cleanup-every 0", soakOf(0, 0), soakFigures, soakLost},
	{"devices --nodes 1", devicesOf(1), devicesFigures, nil},
	{"devices --nodes 3", devicesOf(3), devicesFigures, nil},
	{"fanout --cluster 3 --msgs 20000 --rounds 3", clusterOf("fanout"), clusterFigures, stormLost},
	{"storm --cluster 3 --rounds 3", clusterOf("storm"), clusterFigures, stormLost},
}

var (
	stormLost = []string{"lost", "dup_after_dedupe"}
	liveLost  = []string{"lost", "storm_lost", "dup_after_dedupe"}
	soakLost  = []string{"lost", "dup_after_dedupe"}
)

// reportTable renders the table from ms: for each row, the runs of the
// newest build measured for its command (the newest file holding it, the
// build of its last run there, and every run of that build in that file;
// a run without a build stands alone).
func reportTable(ms []measurement) string {
	var b strings.Builder
	b.WriteString("| command | figures | lost / duplicates | runs | build | date |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, row := range resultRows {
		last := -1
		for i, m := range ms {
			if row.match(m.res) {
				last = i
			}
		}
		if last < 0 {
			fmt.Fprintf(&b, "| `%s` | not measured | | | | |\n", row.command)
			continue
		}
		newest := ms[last]
		var runs []map[string]any
		for _, m := range ms {
			if m.file == newest.file && m.build == newest.build && row.match(m.res) && (newest.build != "" || m.line == newest.line) {
				runs = append(runs, m.res)
			}
		}
		build := newest.build
		if build == "" {
			build = "—"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %d | %s | %s |\n",
			row.command, row.figures(runs), lostCell(runs, row.lost), len(runs), build, newest.date)
	}
	return b.String()
}

// ---------------------------------------------------------------- matching

func scenario(name string) func(map[string]any) bool {
	return func(r map[string]any) bool { return r["scenario"] == name }
}

// is reports whether r's field k is the number v.
func is(r map[string]any, k string, v float64) bool {
	f, ok := r[k].(float64)
	return ok && f == v
}

// allInOne: the scenario ran on the all-in-one (older lines name no mode).
func allInOne(r map[string]any) bool {
	m, ok := r["mode"]
	return !ok || m == "all-in-one"
}

func fanoutOf(group float64) func(map[string]any) bool {
	return func(r map[string]any) bool {
		return r["scenario"] == "fanout" && r["cluster"] == nil && is(r, "group", group) && allInOne(r)
	}
}

func stormOf(users, backlog float64) func(map[string]any) bool {
	return func(r map[string]any) bool {
		kind, _ := r["kind"].(string)
		return r["scenario"] == "storm" && r["cluster"] == nil && is(r, "users", users) && is(r, "backlog", backlog) &&
			(kind == "" || kind == "desktop") && allInOne(r)
	}
}

// liveOf matches a live run beside a users × backlog storm whose idle
// window was idleS seconds: the window's messages at its rate, to the
// nearest 5 s (the lines carry no window length).
func liveOf(users, backlog, idleS float64) func(map[string]any) bool {
	return func(r map[string]any) bool {
		msgs, _ := r["idle_msgs"].(float64)
		rate, _ := r["rate"].(float64)
		return r["scenario"] == "live" && is(r, "storm_users", users) && is(r, "storm_backlog", backlog) &&
			rate > 0 && math.Round(msgs/rate/5)*5 == idleS && allInOne(r)
	}
}

func connsOf(n float64) func(map[string]any) bool {
	return func(r map[string]any) bool {
		return r["scenario"] == "conns" && is(r, "requested", n) && r["fresh_devices"] != true && r["mode"] == "split"
	}
}

func soakOf(hotWindowS, retentionS float64) func(map[string]any) bool {
	return func(r map[string]any) bool {
		return r["scenario"] == "soak" && is(r, "duration_s", 600) && is(r, "hot_window_s", hotWindowS) && is(r, "retention_s", retentionS)
	}
}

func devicesOf(nodes float64) func(map[string]any) bool {
	return func(r map[string]any) bool {
		return r["scenario"] == "devices" && is(r, "nodes", nodes) && is(r, "registered", 60000) && is(r, "online", 5000)
	}
}

func clusterOf(name string) func(map[string]any) bool {
	return func(r map[string]any) bool { return r["scenario"] == name && is(r, "cluster", 3) }
}

// ---------------------------------------------------------------- figures

func fanoutFigures(rs []map[string]any) string {
	s := fmt.Sprintf("%s of raw JetStream publish (%s vs %s entries/s)",
		span(rs, "ratio", fixed(3)), span(rs, "entries_per_s", count), span(rs, "baseline_publish_per_s", count))
	return s + cpuFigures(rs, "µs", 1, fixed(0))
}

func stormFigures(rs []map[string]any) string {
	return fmt.Sprintf("drained in %s s (%s msgs/s, %s × JetStream's own read); first page p99 %s ms",
		span(rs, "drain_s", seconds), span(rs, "msgs_per_s", count), span(rs, "ratio", fixed(2)), span(rs, "first_page_p99_ms", millis))
}

func liveFigures(rs []map[string]any) string {
	s := fmt.Sprintf("idle p50 / p99 %s / %s ms; beside the storm p50 / p99 %s / %s ms, the storm drained in %s s",
		span(rs, "idle_p50_ms", millis), span(rs, "idle_p99_ms", millis),
		span(rs, "storm_p50_ms", millis), span(rs, "storm_p99_ms", millis), span(rs, "storm_drain_s", seconds))
	return s + cpuFigures(rs, "ms", 1000, fixed(2))
}

// cpuFigures is the server CPU per message, in unit (the fields' µs ÷
// div), for the lines that carry it.
func cpuFigures(rs []map[string]any, unit string, div float64, f func(float64) string) string {
	for _, r := range rs {
		if v, _ := r["server_cpu_us_per_msg"].(float64); v <= 0 {
			return ""
		}
	}
	g := func(v float64) string { return f(v / div) }
	return fmt.Sprintf("; server CPU %s %s per message (inboxd %s + Postgres %s)",
		span(rs, "server_cpu_us_per_msg", g), unit, span(rs, "inboxd_cpu_us_per_msg", g), span(rs, "postgres_cpu_us_per_msg", g))
}

func connsFigures(rs []map[string]any) string {
	return fmt.Sprintf("%s B RSS and %s B Go heap per idle connection (the %s process); %s handshakes/s",
		span(rs, "rss_bytes_per_conn", count), span(rs, "go_heap_bytes_per_conn", count), str(rs, "process"), span(rs, "handshakes_per_s", count))
}

func scaleFigures(rs []map[string]any) string {
	return fmt.Sprintf("one device's drain of %s messages: %s ms at %s INBOX entries, %s ms at %s: %s ×",
		span(rs, "backlog", count), span(rs, "drain_ms_small", millis), span(rs, "entries_small", count),
		span(rs, "drain_ms_large", millis), span(rs, "entries_large", count), span(rs, "ratio", fixed(2)))
}

func soakFigures(rs []map[string]any) string {
	level := func(k string) string {
		var sub []map[string]any
		for _, r := range rs {
			if l, ok := r[k].(map[string]any); ok {
				sub = append(sub, l)
			}
		}
		if len(sub) == 0 {
			return "?"
		}
		return fmt.Sprintf("%s–%s MiB from minute %s, then %s MiB/min",
			span(sub, "min", mebibytes), span(sub, "max", mebibytes), span(sub, "from_s", minutes), span(sub, "slope_steady_bytes_per_min", signed(mebibytes)))
	}
	return fmt.Sprintf("JetStream store %s; Postgres %s; send rate last ÷ first minute %s; %s messages stored",
		level("js_store_level"), level("pg_database_level"), span(rs, "send_rate_ratio", fixed(3)), span(rs, "stored", count))
}

func devicesFigures(rs []map[string]any) string {
	return fmt.Sprintf("per registered device (%s, %s online): NATS Go heap %s B, RSS %s B, %s store files; a NATS node's restart: stop %s ms, start %s ms, every online device live again %s ms after the stop; a week-offline device's login %s ms",
		span(rs, "registered", count), span(rs, "online", count), span(rs, "heap_bytes_per_registered_device", count),
		span(rs, "rss_bytes_per_registered_device", count), span(rs, "store_files_per_registered_device", fixed(2)),
		span(rs, "nats_stop_ms", count), span(rs, "nats_start_ms", count), span(rs, "live_again_ms", count), span(rs, "week_offline_login_ms", millis))
}

func clusterFigures(rs []map[string]any) string {
	return fmt.Sprintf("R3 ÷ R1 %s (%s, medians of the rounds: R1 %s, R3 %s)",
		span(rs, "r3_over_r1", fixed(2)), str(rs, "metric"), span(rs, "r1", count), span(rs, "r3", count))
}

// lostCell is the sum of the loss fields over the runs, "—" when the
// scenario counts none.
func lostCell(rs []map[string]any, fields []string) string {
	if len(fields) == 0 {
		return "—"
	}
	var lost, dup float64
	for _, r := range rs {
		for _, f := range fields {
			v, _ := r[f].(float64)
			if f == "dup_after_dedupe" {
				dup += v
			} else {
				lost += v
			}
		}
	}
	return count(lost) + " / " + count(dup)
}

// span is field k over the runs formatted by f: one value, or "min–max"
// when they differ as printed.
func span(rs []map[string]any, k string, f func(float64) string) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, r := range rs {
		v, ok := r[k].(float64)
		if !ok {
			return "?"
		}
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	if len(rs) == 0 {
		return "?"
	}
	if a, b := f(lo), f(hi); a != b {
		return a + "–" + b
	}
	return f(lo)
}

// str is field k of the runs, when they agree.
func str(rs []map[string]any, k string) string {
	s, _ := rs[0][k].(string)
	for _, r := range rs[1:] {
		if r[k] != s {
			return "?"
		}
	}
	return s
}

func fixed(decimals int) func(float64) string {
	return func(v float64) string { return strconv.FormatFloat(v, 'f', decimals, 64) }
}

// count is v rounded, with thousands separators: 37,174.
func count(v float64) string {
	s := strconv.FormatFloat(math.Abs(math.Round(v)), 'f', 0, 64)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if math.Round(v) < 0 {
		s = "−" + s
	}
	return s
}

// millis: a tenth of a millisecond below 100 ms, whole ones above.
func millis(v float64) string {
	if v < 100 {
		return fixed(1)(v)
	}
	return count(v)
}

// seconds: hundredths below 10 s, tenths above.
func seconds(v float64) string {
	if v < 10 {
		return fixed(2)(v)
	}
	return fixed(1)(v)
}

func mebibytes(v float64) string { return fixed(1)(v / (1 << 20)) }

func minutes(v float64) string { return strconv.FormatFloat(v/60, 'f', -1, 64) }

func signed(f func(float64) string) func(float64) string {
	return func(v float64) string {
		if v < 0 {
			return "−" + f(-v)
		}
		return "+" + f(v)
	}
}

// ---------------------------------------------------------------- command

// reportMain is `inboxbench report`: it rewrites the results table of
// --out from the results files of --results, or with --check says
// whether it is current.
func reportMain(args []string) {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	results := fs.String("results", "docs/benchmarks", "directory of the results-YYYY-MM-DD[-what].jsonl files")
	out := fs.String("out", "docs/benchmarks.md", "the page whose <!-- results:begin --> … <!-- results:end --> lines are rewritten")
	check := fs.Bool("check", false, "write nothing; exit 1 when the page's table is not what the results give")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: inboxbench report [--results DIR] [--out PAGE] [--check]")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	page, current, err := reportPage(*results, *out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "inboxbench report: %v\n", err)
		os.Exit(1)
	}
	switch {
	case bytes.Equal(page, current):
		return
	case *check:
		fmt.Fprintf(os.Stderr, "inboxbench report: %s is not what %s gives: run inboxbench report --results %s --out %s\n", *out, *results, *results, *out)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, page, 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "inboxbench report: %v\n", err)
		os.Exit(1)
	}
}

// reportPage is the page at path with its table rendered from the results
// of dir, and the page as it is.
func reportPage(dir, path string) (page, current []byte, err error) {
	ms, err := loadResults(dir)
	if err != nil {
		return nil, nil, err
	}
	if len(ms) == 0 {
		return nil, nil, errors.New(dir + ": no results")
	}
	current, err = os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	page, err = docmarks.Replace(current, reportMarks, reportTable(ms))
	return page, current, err
}
