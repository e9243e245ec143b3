package main

// The storm scenario: the driver (runStorm; startStorm also seeds the live
// scenario's storm) and its worker operations, storm (the devices) and
// jsdrain (the baseline).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/streams"
)

// ---------------------------------------------------------------- driver

type stormOut struct {
	Scenario         string  `json:"scenario"`
	Users            int     `json:"users"`
	Backlog          int     `json:"backlog"`
	DrainS           float64 `json:"drain_s"`
	MsgsPerS         float64 `json:"msgs_per_s"`
	FirstPageP99Ms   float64 `json:"first_page_p99_ms"`
	BaselineMsgsPerS float64 `json:"baseline_msgs_per_s"`
	Ratio            float64 `json:"ratio"`
	Lost             int64   `json:"lost"`
	DupAfterDedupe   int64   `json:"dup_after_dedupe"`
	FirstPageP50Ms   float64 `json:"first_page_p50_ms"`
	DrainedP50Ms     float64 `json:"device_drained_p50_ms"`
	DrainedP99Ms     float64 `json:"device_drained_p99_ms"`
	Unexpected       int64   `json:"unexpected"`
	DialFailed       int     `json:"dial_failed"`
	DialRetries      int64   `json:"dial_retries"`
	BaselineLost     int64   `json:"baseline_lost"`
	Kind             string  `json:"kind"`
	Workers          int     `json:"workers"`
	Mode             string  `json:"mode"`
	Quick            bool    `json:"quick"`
}

// runStorm: U devices, each with B offline messages, connect at the same
// intended instant t0 and drain. drain_s runs from t0 to the last message
// handed to a handler; first-page latency is from t0 (the intended connect
// time, not the moment a dial got going) to the device's first message,
// so a gateway that is slow to accept shows up (no coordinated omission).
func runStorm(ctx context.Context, o *opts) (any, error) {
	users := orDefault(o.users, pick(o.quick, 60, 300))
	backlog := orDefault(o.backlog, pick(o.quick, 20, 200))
	if o.quick && o.workers == 0 {
		o.workers = 2 // exercise the multi-worker path
	}
	sys, st, stop, err := startStorm(ctx, o, users, backlog)
	if err != nil {
		return nil, err
	}
	defer stop()
	logf(o.sys.verbose, "storm: %d devices × %d messages connect", users, backlog)
	defer saveMetrics(o.profile, sys, "storm") // after the baseline, before the system stops
	// The profiles cover the wave (a 3,000 × 200 storm drains in 3-5 s
	// on this machine), not the baseline after it: its ordered consumers
	// walking the partitions were 12 % of a profile that ran into it.
	profiled := profileWave(o.profile, sys, 5*time.Second)
	agg, t0, err := st.run(o, sys)
	profiled()
	if err != nil {
		return nil, fmt.Errorf("storm: the wave: %w", err)
	}
	logf(o.sys.verbose, "storm: baseline (JetStream ordered consumers)")
	base, err := st.baseline(o, sys)
	if err != nil {
		return nil, fmt.Errorf("storm: the baseline: %w", err)
	}
	fp, dr := mergeHists(agg.firstPage...), mergeHists(agg.drained...)
	writeCDF(o, fmt.Sprintf("storm-%dx%d-first-page.tsv", users, backlog), fp)
	writeCDF(o, fmt.Sprintf("storm-%dx%d-drained.tsv", users, backlog), dr)
	out := stormOut{Scenario: "storm", Users: users, Backlog: backlog, Lost: agg.res.Lost, DupAfterDedupe: agg.res.Dup,
		FirstPageP99Ms: ms(fp, 99), FirstPageP50Ms: ms(fp, 50), DrainedP50Ms: ms(dr, 50), DrainedP99Ms: ms(dr, 99),
		Unexpected: agg.res.Unexpected, DialFailed: agg.res.DialFailed, DialRetries: agg.res.DialRetries,
		BaselineLost: base.res.Lost, Kind: o.kind, Workers: len(st.pool), Mode: modeName(o), Quick: o.quick}
	if agg.res.LastNs > t0 {
		out.DrainS = round3(float64(agg.res.LastNs-t0) / 1e9)
		out.MsgsPerS = rate(agg.res.Received, t0, agg.res.LastNs)
	}
	out.BaselineMsgsPerS = rate(base.res.Received, base.res.StartNs, base.res.LastNs)
	out.Ratio = ratio(out.MsgsPerS, out.BaselineMsgsPerS)
	return out, nil
}

// stormSetup is a seeded login storm: devices registered (each logged in
// once, so it has a cursor), then gone offline while its backlog was sent.
type stormSetup struct {
	users, backlog int
	groups         [][]int64       // msg_ids per seeding group, in conv_seq order
	devices        [][]stormDevice // per storm worker
	pool           pool
}

// startStorm starts a system and the storm's workers and seeds the storm
// (storm and live); stop stops both.
func startStorm(ctx context.Context, o *opts, users, backlog int) (*system, *stormSetup, func(), error) {
	if o.quick && o.seedGroup == 100 {
		o.seedGroup = 20
	}
	sys, p, stop, err := startWith(ctx, o, orDefault(o.workers, workersFor(users)))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("start the system: %w", err)
	}
	st, err := prepareStorm(ctx, o, sys, p, users, backlog)
	if err != nil {
		stop()
		return nil, nil, nil, err
	}
	return sys, st, stop, nil
}

// prepareStorm registers U devices (uids 1..U, device "storm") and gives
// each exactly B offline messages: the users are split into group
// conversations of --seed-group members plus one sender (uid 1,000,000+g,
// not a storm user) that sends B messages to its group through the real
// send path. The msg_ids from the STORED answers are what every member of
// the group must receive; the storm checks each device against them.
func prepareStorm(ctx context.Context, o *opts, sys *system, p pool, users, backlog int) (*stormSetup, error) {
	st := &stormSetup{users: users, backlog: backlog, pool: p}
	nw := len(p)
	G := max(o.seedGroup, 1)
	ng := (users + G - 1) / G
	convs := make([]int64, ng)
	var senders []sender
	for g := 0; g < ng; g++ {
		members := []int64{int64(1_000_000 + g)}
		for u := g*G + 1; u <= min((g+1)*G, users); u++ {
			members = append(members, int64(u))
		}
		var err error
		if convs[g], err = sys.createConv(ctx, true, members...); err != nil {
			return nil, err
		}
		senders = append(senders, sender{UID: int64(1_000_000 + g), Conv: convs[g], Count: backlog})
	}
	ranges := split(users, nw)
	st.devices = make([][]stormDevice, nw)
	for w, r := range ranges {
		for u := r[0] + 1; u <= r[1]; u++ {
			st.devices[w] = append(st.devices[w], stormDevice{UID: int64(u), G: (u - 1) / G})
		}
	}
	logf(o.sys.verbose, "storm: registering %d devices on %d workers", users, nw)
	err := p.each(func(i int, w *workerProc) error {
		return register(w, holdArgs{target: sys.target(o.kind), From: int64(ranges[i][0] + 1), To: int64(ranges[i][1] + 1),
			Device: "storm", Concurrency: 128})
	})
	if err != nil {
		return nil, fmt.Errorf("storm: register the devices: %w", err)
	}
	logf(o.sys.verbose, "storm: seeding %d messages to %d groups", ng*backlog, ng)
	var sr sendResult
	if err := p[0].call("send", sendArgs{target: sys.target(""), Senders: senders, Window: 64,
		Text: "offline message", Prefix: "seed", Collect: true}, &sr); err != nil {
		return nil, fmt.Errorf("storm: seed the backlog: %w", err)
	}
	st.groups = make([][]int64, ng)
	for g, c := range convs {
		st.groups[g] = sr.IDs[strconv.FormatInt(c, 10)]
		if len(st.groups[g]) != backlog {
			return nil, fmt.Errorf("seeding: group %d stored %d of %d messages", g, len(st.groups[g]), backlog)
		}
	}
	logf(o.sys.verbose, "storm: seeded at %.0f msgs/s; waiting for the archiver", rate(sr.Msgs, sr.StartNs, sr.EndNs))
	if err := sys.waitArchived(ctx, 10*time.Minute); err != nil {
		return nil, fmt.Errorf("storm: wait for the archiver: %w", err)
	}
	return st, nil
}

type stormAgg struct {
	res       stormResult
	firstPage []string
	drained   []string
}

// run connects every device at t0 and waits for all of them to drain.
func (st *stormSetup) run(o *opts, sys *system) (stormAgg, int64, error) {
	t0 := time.Now().Add(500 * time.Millisecond).UnixNano()
	results := make([]stormResult, len(st.pool))
	err := st.pool.each(func(i int, w *workerProc) error {
		return w.call("storm", stormArgs{target: sys.target(o.kind), Device: "storm", Devices: st.devices[i], Groups: st.groups,
			T0: t0, TimeoutMs: o.timeout.Milliseconds()}, &results[i])
	})
	var agg stormAgg
	for _, r := range results {
		agg.res.add(r)
		agg.firstPage = append(agg.firstPage, r.FirstPage)
		agg.drained = append(agg.drained, r.Drained)
	}
	return agg, t0, err
}

// baseline reads every device's backlog straight from JetStream: one
// ordered consumer per user filtered to its inbox subject, 256 users at a
// time per worker over 4 NATS connections per worker. It runs after the
// storm, so the page cache favours it if anything (the ratio is
// conservative).
func (st *stormSetup) baseline(o *opts, sys *system) (stormAgg, error) {
	results := make([]stormResult, len(st.pool))
	err := st.pool.each(func(i int, w *workerProc) error {
		return w.call("jsdrain", jsDrainArgs{natsTarget: sys.natsTarget(), Partitions: o.sys.partitions, Devices: st.devices[i],
			Groups: st.groups, Concurrency: 256, Conns: 4, TimeoutMs: o.timeout.Milliseconds()}, &results[i])
	})
	var agg stormAgg
	for _, r := range results {
		agg.res.add(r)
	}
	return agg, err
}

// ---------------------------------------------------------------- worker

// storm: devices with a backlog connect at once and drain.
type stormDevice struct {
	UID int64 `json:"u"`
	G   int   `json:"g"` // index into Groups: the msg_ids the device must get
}

type stormArgs struct {
	target
	Device    string        `json:"device"`
	Devices   []stormDevice `json:"devices"`
	Groups    [][]int64     `json:"groups"`
	T0        int64         `json:"t0"` // intended connect time of every device (unix ns)
	TimeoutMs int64         `json:"timeout_ms"`
}

type stormResult struct {
	Devices     int    `json:"devices"`
	Expected    int64  `json:"expected"`
	Received    int64  `json:"received"`
	Lost        int64  `json:"lost"`
	Dup         int64  `json:"dup"`
	Unexpected  int64  `json:"unexpected"`
	Incomplete  int    `json:"incomplete"`
	DialFailed  int    `json:"dial_failed"`
	DialRetries int64  `json:"dial_retries"`
	StartNs     int64  `json:"start_ns"`
	LastNs      int64  `json:"last_ns"`
	FirstPage   string `json:"first_page"` // intended connect → first message handled
	Drained     string `json:"drained"`    // intended connect → last message handled
}

// device counts one device that had want messages to get and got got of
// them, dup twice, and extra messages it should not have had.
func (r *stormResult) device(want, got, dup, extra int64) {
	r.Devices++
	r.Expected += want
	r.Received += got
	r.Lost += want - got
	r.Dup += dup
	r.Unexpected += extra
	if got < want {
		r.Incomplete++
	}
}

// add merges the result of another worker into r.
func (r *stormResult) add(o stormResult) {
	r.Devices += o.Devices
	r.Expected += o.Expected
	r.Received += o.Received
	r.Lost += o.Lost
	r.Dup += o.Dup
	r.Unexpected += o.Unexpected
	r.Incomplete += o.Incomplete
	r.DialFailed += o.DialFailed
	r.DialRetries += o.DialRetries
	r.LastNs = max(r.LastNs, o.LastNs)
	if r.StartNs == 0 || (o.StartNs != 0 && o.StartNs < r.StartNs) {
		r.StartNs = o.StartNs
	}
}

// expected is the msg_ids one device must get (index: msg_id → position,
// shared by the devices of a group and read-only) and which it has got.
type expected struct {
	index map[int64]int32
	seen  []uint64
}

func newExpected(index map[int64]int32, want int) expected {
	return expected{index: index, seen: make([]uint64, (want+63)/64)}
}

type mark int8

const (
	markNew        mark = iota // first time
	markDup                    // handed over before
	markUnexpected             // not one of the device's messages
)

// mark records that msgID was handed over.
func (e *expected) mark(msgID int64) mark {
	i, ok := e.index[msgID]
	switch {
	case !ok:
		return markUnexpected
	case e.seen[i/64]&(1<<(i%64)) != 0:
		return markDup
	}
	e.seen[i/64] |= 1 << (i % 64)
	return markNew
}

func groupIndexes(groups [][]int64) []map[int64]int32 {
	idx := make([]map[int64]int32, len(groups))
	for g, list := range groups {
		idx[g] = make(map[int64]int32, len(list))
		for i, id := range list {
			idx[g][id] = int32(i)
		}
	}
	return idx
}

// devState is one storm device's tally. The handler runs on the client's
// delivery goroutine only; the counters the parent reads are atomics.
type devState struct {
	exp      expected
	want     int32
	got      atomic.Int32
	dup      atomic.Int32
	extra    atomic.Int32
	firstNs  atomic.Int64
	lastNs   atomic.Int64
	finished func()
}

func (d *devState) handle(m client.Message) error {
	now := time.Now().UnixNano()
	d.firstNs.CompareAndSwap(0, now)
	switch d.exp.mark(m.MsgID) {
	case markUnexpected:
		d.extra.Add(1)
	case markDup:
		d.dup.Add(1) // the client handed the same msg_id over twice
	case markNew:
		d.lastNs.Store(now)
		if d.got.Add(1) == d.want {
			d.finished()
		}
	}
	return nil
}

func (w *worker) storm(a stormArgs) (stormResult, error) {
	idx := groupIndexes(a.Groups)
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, a.T0).Add(time.Duration(a.TimeoutMs)*time.Millisecond))
	defer cancel()
	var remaining atomic.Int64
	remaining.Store(int64(len(a.Devices)))
	allDone := make(chan struct{})
	finished := func() {
		if remaining.Add(-1) == 0 {
			close(allDone)
		}
	}
	devs := make([]*devState, len(a.Devices))
	clients := make([]*client.Client, len(a.Devices))
	var dialFailed, retries atomic.Int64
	var wg sync.WaitGroup
	for i, sd := range a.Devices {
		want := len(a.Groups[sd.G])
		d := &devState{exp: newExpected(idx[sd.G], want), want: int32(want), finished: finished}
		devs[i] = d
		if want == 0 {
			finished()
		}
		o, err := w.options(a.target, sd.UID, a.Device)
		if err != nil {
			return stormResult{}, err
		}
		o.Handler = d.handle
		// Only backfill arrives: a long gap wait only slows the client's
		// idle ticker (4 wakeups a second instead of 8) and never delays a
		// message here.
		o.GapWait = 2 * time.Second
		o.DedupeSize = want + 1024
		wg.Add(1)
		go func(i int, o client.Options) {
			defer wg.Done()
			time.Sleep(time.Until(time.Unix(0, a.T0)))
			c, n, err := dialRetry(ctx, o, 1<<20)
			retries.Add(int64(n))
			if err != nil {
				dialFailed.Add(1)
				return
			}
			clients[i] = c
		}(i, o)
	}
	if len(a.Devices) == 0 {
		close(allDone)
	}
	select {
	case <-allDone:
	case <-ctx.Done():
	}
	wg.Wait() // dials end with ctx at the latest
	var res stormResult
	fp, dr := newHist(), newHist()
	for _, d := range devs {
		res.device(int64(d.want), int64(d.got.Load()), int64(d.dup.Load()), int64(d.extra.Load()))
		if f := d.firstNs.Load(); f > 0 {
			record(fp, time.Duration(f-a.T0))
		}
		if l := d.lastNs.Load(); l > 0 {
			record(dr, time.Duration(l-a.T0))
			res.LastNs = max(res.LastNs, l)
		}
	}
	res.DialFailed = int(dialFailed.Load())
	res.DialRetries = retries.Load()
	res.FirstPage, res.Drained = encodeHist(fp), encodeHist(dr)
	closeAll(clients) // confirms what was handled, then closes
	return res, nil
}

// jsdrain: the storm baseline, the same backlogs read straight from the
// INBOX streams, one ordered (ephemeral, flow-controlled) consumer filtered
// to each user's subject.
type jsDrainArgs struct {
	natsTarget
	Partitions  int           `json:"partitions"`
	Devices     []stormDevice `json:"devices"`
	Groups      [][]int64     `json:"groups"`
	Concurrency int           `json:"concurrency"`
	Conns       int           `json:"conns"`
	TimeoutMs   int64         `json:"timeout_ms"`
}

func (w *worker) jsDrain(a jsDrainArgs) (stormResult, error) {
	idx := groupIndexes(a.Groups)
	var jss []jetstream.JetStream
	for i := 0; i < max(a.Conns, 1); i++ {
		nc, err := a.connect()
		if err != nil {
			return stormResult{}, err
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		if err != nil {
			return stormResult{}, err
		}
		jss = append(jss, js)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(a.TimeoutMs)*time.Millisecond)
	defer cancel()
	sem := make(chan struct{}, max(a.Concurrency, 1))
	var res stormResult
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for i, sd := range a.Devices {
		sem <- struct{}{}
		wg.Add(1)
		go func(js jetstream.JetStream, sd stormDevice) {
			defer wg.Done()
			defer func() { <-sem }()
			want := len(a.Groups[sd.G])
			got, dup, extra, err := drainUser(ctx, js, a.Partitions, sd.UID, newExpected(idx[sd.G], want), want)
			for try := 0; errors.Is(err, nats.ErrNoResponders) && try < 50; try++ {
				// On a cluster (--cluster) a request can reach a server that
				// does not know the consumer's subscriptions yet (interest
				// propagates over the routes): drain the user again.
				time.Sleep(100 * time.Millisecond)
				got, dup, extra, err = drainUser(ctx, js, a.Partitions, sd.UID, newExpected(idx[sd.G], want), want)
			}
			mu.Lock()
			defer mu.Unlock()
			res.device(int64(want), int64(got), int64(dup), int64(extra))
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}(jss[i%len(jss)], sd)
	}
	wg.Wait()
	res.LastNs = time.Now().UnixNano()
	res.StartNs = start.UnixNano()
	return res, firstErr
}

func drainUser(ctx context.Context, js jetstream.JetStream, parts int, uid int64, exp expected, want int) (got, dup, extra int, err error) {
	p := ids.Partition(uid, parts)
	c, err := js.OrderedConsumer(ctx, streams.InboxStream(p), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{streams.InboxSubject(p, uid)},
	})
	if err != nil {
		return 0, 0, 0, err
	}
	for got < want {
		batch, err := c.Fetch(want-got, jetstream.FetchMaxWait(2*time.Second))
		if err == nil {
			err = batch.Error()
		}
		if err != nil && !errors.Is(err, nats.ErrTimeout) {
			return got, dup, extra, err
		}
		n := 0
		for m := range batch.Messages() {
			n++
			e, err := streams.DecodeEntry(m.Data())
			if err != nil {
				extra++
				continue
			}
			switch exp.mark(e.MsgID) {
			case markUnexpected:
				extra++
			case markDup:
				dup++
			case markNew:
				got++
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return got, dup, extra, err
		}
		if n == 0 {
			break // nothing more in the stream for this user
		}
	}
	return got, dup, extra, nil
}
