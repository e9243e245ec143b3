package main

import (
	"encoding/json"
	"flag"
	"testing"
	"time"
)

// TestQuickStormCluster runs storm --cluster 3 in quick mode: a 3-node
// NATS cluster, an R1 and an R3 run, each checked for its replica count
// at start; the result carries both and their ratio, and nothing was lost
// or duplicated in either.
func TestQuickStormCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two clustered systems")
	}
	stdout := &runBench(t, 4*time.Minute, "", "storm", "--cluster", "3", "--quick").stdout
	var out struct {
		Scenario       string  `json:"scenario"`
		Cluster        int     `json:"cluster"`
		R1             float64 `json:"r1"`
		R3             float64 `json:"r3"`
		R3OverR1       float64 `json:"r3_over_r1"`
		Lost           *int64  `json:"lost"`
		DupAfterDedupe *int64  `json:"dup_after_dedupe"`
		Runs           []struct {
			Replicas int `json:"replicas"`
			Result   struct {
				Mode string `json:"mode"`
			} `json:"result"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("not one JSON object: %q: %v", stdout.String(), err)
	}
	t.Logf("%s", stdout.String())
	if out.Scenario != "storm" || out.Cluster != 3 {
		t.Errorf("scenario %q cluster %d, want storm 3", out.Scenario, out.Cluster)
	}
	if out.R1 <= 0 || out.R3 <= 0 || out.R3OverR1 <= 0 {
		t.Errorf("r1 %v, r3 %v, r3_over_r1 %v: want all > 0", out.R1, out.R3, out.R3OverR1)
	}
	if out.Lost == nil || *out.Lost != 0 || out.DupAfterDedupe == nil || *out.DupAfterDedupe != 0 {
		t.Errorf("lost %v, dup_after_dedupe %v: want both 0", out.Lost, out.DupAfterDedupe)
	}
	var modes []string
	for _, r := range out.Runs {
		modes = append(modes, r.Result.Mode)
	}
	if len(modes) != 2 || modes[0] != "cluster-3-R1" || modes[1] != "cluster-3-R3" {
		t.Errorf("runs %v, want cluster-3-R1 then cluster-3-R3", modes)
	}
}

func TestClusterFlags(t *testing.T) {
	for _, c := range []struct {
		cmd  string
		args []string
		ok   bool
	}{
		{"storm", []string{"--cluster", "3"}, true},
		{"fanout", []string{"--cluster", "3", "--replicas", "3"}, true},
		{"live", []string{"--cluster", "3"}, false},
		{"storm", []string{"--cluster", "3", "--split"}, false},
		{"storm", []string{"--replicas", "3"}, false},
		{"storm", []string{"--cluster", "3", "--replicas", "2"}, false},
	} {
		var o opts
		fs := newFlagSet(c.cmd, &o, flag.ContinueOnError)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		o.set = map[string]bool{}
		fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
		if err := checkClusterFlags(c.cmd, &o); (err == nil) != c.ok {
			t.Errorf("%s %v: error %v, want ok %v", c.cmd, c.args, err, c.ok)
		}
	}
}
