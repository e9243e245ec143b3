package main

// --cluster N: the system under test on an N-node NATS cluster.
// N `inboxd --nats-only` nodes (--name nK, --cluster-listen, --routes)
// form one NATS cluster with JetStream; the syncer (started first: it
// creates the streams with --replicas), the fanout and the gateway are
// separate processes connected with --nats to every node. fanout and storm
// then measure R1 and R3 on the same cluster, alternately, --rounds times
// each (a fresh system per run: the box is noisy, so the ratio of runs
// measured side by side is the figure, not either absolute), and print the
// medians and the ratio r3/r1.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/internal/natsauth"
)

// startCluster starts the N NATS nodes and the services of s (called by
// startSystem with --cluster).
func (s *system) startCluster(ctx context.Context, common, gwFlags []string) error {
	o := s.o
	if o.replicas > o.cluster {
		return fmt.Errorf("--replicas %d: more than the %d nodes of --cluster", o.replicas, o.cluster)
	}
	client, route := make([]string, o.cluster), make([]string, o.cluster)
	for i := range o.cluster {
		var err error
		if client[i], err = freeAddr(); err != nil {
			return err
		}
		if route[i], err = freeAddr(); err != nil {
			return err
		}
	}
	var urls []string
	for i := range o.cluster {
		var routes []string
		for j := range o.cluster {
			if j != i {
				routes = append(routes, "nats://"+route[j])
			}
		}
		ops, err := freeAddr()
		if err != nil {
			return err
		}
		name := "n" + strconv.Itoa(i+1)
		// Readiness of a NATS-only process is its client port (as --split).
		s.readyAddr = client[i]
		if _, err := s.spawn(ctx, "inboxd", ops, "--nats-only", "--name", name, "--data", s.dir+"/"+name,
			"--nats-listen", client[i], "--cluster-listen", route[i], "--routes", strings.Join(routes, ","),
			"--inbox-partitions", strconv.Itoa(o.partitions), "--log-level", "warn"); err != nil {
			return err
		}
		urls = append(urls, "nats://"+client[i])
	}
	s.readyAddr = ""
	s.natsURL = strings.Join(urls, ",")
	if err := s.waitMetaLeader(ctx); err != nil {
		return err
	}
	svc := append([]string{"--nats", s.natsURL}, common...)
	addr := func() string { a, _ := freeAddr(); return a }
	// The syncer first: it creates the streams with --replicas and serves
	// the admin API; the others wait for the streams.
	if _, err := s.spawn(ctx, "syncer", addr(), append(slices.Clone(svc), "--replicas", strconv.Itoa(o.replicas))...); err != nil {
		return err
	}
	if _, err := s.spawn(ctx, "fanout", addr(), append(slices.Clone(svc), "--node-id", "1")...); err != nil {
		return err
	}
	var err error
	s.gw, err = s.spawn(ctx, "gateway", addr(), append(slices.Clone(svc), gwFlags...)...)
	return err
}

// waitMetaLeader waits until JetStream answers on the cluster (it has a
// meta leader): a syncer started before that may time out creating the
// streams.
func (s *system) waitMetaLeader(ctx context.Context) error {
	nc, err := nats.Connect(s.natsURL, nats.UserInfo(string(natsauth.Admin), natsauth.Password(natsauth.Admin)))
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.AccountInfo(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("cluster: JetStream not ready after 90s: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkClusterReplicas checks that the streams have the replica count the
// run claims, and waits (up to 30 s) for SEND to have a leader: an R3
// stream just created may still be electing one, and a stream info
// request meanwhile goes unanswered (a CI run once failed its R3 round on
// a bare "context deadline exceeded" there).
func (s *system) checkClusterReplicas(ctx context.Context) error {
	if s.o.cluster == 0 {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := s.sendReplicas(ctx)
		if err == nil || errors.Is(err, errWrongReplicas) || ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: SEND not served after 30s: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var errWrongReplicas = errors.New("wrong replica count")

func (s *system) sendReplicas(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := s.js.Stream(cctx, "SEND")
	if err != nil {
		return err
	}
	info := st.CachedInfo()
	if info.Config.Replicas != s.o.replicas {
		return fmt.Errorf("%w: SEND has %d replicas, the run asked for %d", errWrongReplicas, info.Config.Replicas, s.o.replicas)
	}
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return errors.New("SEND has no cluster leader")
	}
	return nil
}

// checkClusterFlags refuses --cluster where it is not implemented and
// --replicas without it.
func checkClusterFlags(cmd string, o *opts) error {
	if o.sys.cluster != 0 && cmd != "fanout" && cmd != "storm" {
		return fmt.Errorf("--cluster: fanout and storm only, not %s", cmd)
	}
	if o.sys.cluster != 0 && (o.sys.split || o.sys.url != "") {
		return errors.New("--cluster starts its own split system: not with --split or --url")
	}
	if o.set["replicas"] && (o.sys.cluster == 0 || (o.sys.replicas != 1 && o.sys.replicas != 3)) {
		return fmt.Errorf("--replicas %d: 1 or 3, with --cluster", o.sys.replicas)
	}
	return nil
}

// clustered wraps a scenario: without --cluster it runs as is; with it,
// R1 and R3 runs alternate (or only --replicas when given), --rounds each.
func clustered(run func(context.Context, *opts) (any, error)) func(context.Context, *opts) (any, error) {
	return func(ctx context.Context, o *opts) (any, error) {
		if o.sys.cluster == 0 {
			return run(ctx, o)
		}
		if o.sys.cluster < 3 {
			return nil, fmt.Errorf("--cluster %d: a NATS cluster needs 3 nodes at least", o.sys.cluster)
		}
		reps := []int{1, 3}
		if o.set["replicas"] {
			reps = []int{o.sys.replicas}
		}
		rounds := orDefault(o.rounds, pick(o.quick, 1, 3))
		out := clusterOut{Cluster: o.sys.cluster, Rounds: rounds, Quick: o.quick}
		for r := 0; r < rounds; r++ {
			for _, n := range reps {
				oo := *o
				oo.sys.replicas = n
				logf(o.sys.verbose, "cluster: round %d, R%d", r+1, n)
				res, err := run(ctx, &oo)
				if err != nil {
					return nil, fmt.Errorf("round %d, R%d: %w", r+1, n, err)
				}
				out.add(n, res)
			}
		}
		out.summarize()
		return out, nil
	}
}

// clusterOut is the result of a scenario with --cluster: its headline
// metric (fanout: entries_per_s; storm: msgs_per_s) for R1 and R3, medians
// over the rounds, and r3_over_r1, the median of the rounds' ratios (each
// round's R1 and R3 runs ran back to back). Runs holds every run's full
// result with its replica count.
type clusterOut struct {
	Scenario       string    `json:"scenario"`
	Cluster        int       `json:"cluster"`
	Metric         string    `json:"metric"`
	R1             float64   `json:"r1"`
	R3             float64   `json:"r3"`
	R3OverR1       float64   `json:"r3_over_r1"`
	RoundRatios    []float64 `json:"round_ratios"`
	R1FirstPageP99 float64   `json:"r1_first_page_p99_ms,omitempty"`
	R3FirstPageP99 float64   `json:"r3_first_page_p99_ms,omitempty"`
	Lost           int64     `json:"lost"`
	DupAfterDedupe int64     `json:"dup_after_dedupe"`
	Rounds         int       `json:"rounds"`
	Runs           []any     `json:"runs"`
	Quick          bool      `json:"quick"`

	byReps map[int][]float64
	p99    map[int][]float64
}

type clusterRun struct {
	Replicas int `json:"replicas"`
	Result   any `json:"result"`
}

func (c *clusterOut) add(replicas int, res any) {
	if c.byReps == nil {
		c.byReps, c.p99 = map[int][]float64{}, map[int][]float64{}
	}
	c.Runs = append(c.Runs, clusterRun{replicas, res})
	switch r := res.(type) {
	case fanoutResult:
		c.Scenario, c.Metric = "fanout", "entries_per_s"
		c.byReps[replicas] = append(c.byReps[replicas], r.EntriesPerS)
	case stormOut:
		c.Scenario, c.Metric = "storm", "msgs_per_s"
		c.byReps[replicas] = append(c.byReps[replicas], r.MsgsPerS)
		c.p99[replicas] = append(c.p99[replicas], r.FirstPageP99Ms)
		c.Lost += r.Lost
		c.DupAfterDedupe += r.DupAfterDedupe
	}
}

func (c *clusterOut) summarize() {
	c.R1, c.R3 = medianOr0(c.byReps[1]), medianOr0(c.byReps[3])
	c.R1FirstPageP99, c.R3FirstPageP99 = medianOr0(c.p99[1]), medianOr0(c.p99[3])
	r1, r3 := c.byReps[1], c.byReps[3]
	var ratios []float64
	for i := range min(len(r1), len(r3)) {
		ratios = append(ratios, ratio(r3[i], r1[i]))
	}
	c.RoundRatios = ratios
	c.R3OverR1 = medianOr0(ratios)
}

// medianOr0 is soak.go's median, 0 for no values.
func medianOr0(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return median(v)
}
