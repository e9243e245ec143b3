package deploy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// dashboardExprs returns the PromQL expressions of the Grafana dashboard
// by panel title.
func dashboardExprs(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("grafana/inboxd.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana/inboxd.json: %v", err)
	}
	out := map[string][]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[p.Title] = append(out[p.Title], tg.Expr)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
	return out
}

var metricName = regexp.MustCompile(`\b(?:inboxd|go|process)_[a-zA-Z0-9_]+`)

// Every metric the dashboard's queries name is one a real node serves on
// /metrics. The node runs every role (the all-in-one); a workload (a
// login, a send, a refused hello) makes the
// metrics with labels appear, which /metrics lists only once they have a
// series.
func TestGrafanaDashboardUsesServedMetrics(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.HotWindow = 10 * time.Second // a trimmer round a second: the archive lag gauges
	n := testnode.StartNode(t, cfg, config.RoleAllInOne)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conv, err := (&admin.Client{NC: testnode.Admin(t, n)}).CreateConv(ctx, admin.CreateConvRequest{Members: []int64{1, 2}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, client.Options{URL: n.Gateway.WSURL(), Token: testenv.Token(t, 1, "phone")})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Send(ctx, conv.ConvID, "m1", "hello"); err != nil {
		t.Fatal(err)
	}
	if bad, err := client.Dial(ctx, client.Options{URL: n.Gateway.WSURL(), Token: "not-a-token"}); err == nil {
		bad.Close()
		t.Fatal("a hello with a bad token was accepted")
	}

	served := map[string]bool{}
	deadline := time.Now().Add(20 * time.Second)
	var missing []string
	for {
		for k := range scrapeNames(t, "http://"+n.Ops.Addr()+"/metrics") {
			served[k] = true
		}
		missing = missing[:0]
		for title, exprs := range dashboardExprs(t) {
			for _, e := range exprs {
				for _, name := range metricName.FindAllString(e, -1) {
					if !served[name] && !definedOnly[name] {
						missing = append(missing, name+" ("+title+")")
					}
				}
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the dashboard names metrics the node does not serve:\n%s", strings.Join(missing, "\n"))
	}
	// The few the workload cannot cause are at least defined in the code
	// under that name.
	for name := range definedOnly {
		if served[name] {
			continue
		}
		if !definedInCode(t, name) {
			t.Errorf("%s: the dashboard names it and no code of internal/ defines it", name)
		}
	}
}

// definedOnly are metrics with labels whose events a short test cannot
// cause on a healthy node (their series appear at the first one).
var definedOnly = map[string]bool{
	"inboxd_jetstream_api_errors_total": true, // an error answer to one of the node's own calls
}

// definedInCode reports whether a Go file of internal/ names the metric.
func definedInCode(t *testing.T, name string) bool {
	found := false
	_ = filepath.Walk("../internal", func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, _ := os.ReadFile(p)
		found = found || strings.Contains(string(b), `"`+name+`"`)
		return nil
	})
	return found
}

// scrapeNames returns the series names of a /metrics page.
func scrapeNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if l == "" || l[0] == '#' {
			continue
		}
		out[strings.FieldsFunc(l, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
	}
	return out
}
