package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
)

func modeName(o *opts) string {
	switch {
	case o.sys.url != "":
		return "external"
	case o.sys.split:
		return "split"
	}
	return "all-in-one"
}

func rate(n int64, startNs, endNs int64) float64 {
	if endNs <= startNs {
		return 0
	}
	return round3(float64(n) / (float64(endNs-startNs) / 1e9))
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round3(a / b)
}

// ---------------------------------------------------------------- fanout

type fanoutResult struct {
	Scenario            string  `json:"scenario"`
	EntriesPerS         float64 `json:"entries_per_s"`
	MsgsPerS            float64 `json:"msgs_per_s"`
	BaselinePublishPerS float64 `json:"baseline_publish_per_s"`
	Ratio               float64 `json:"ratio"`
	Group               int     `json:"group"`
	Senders             int     `json:"senders"`
	Msgs                int64   `json:"msgs"`
	Entries             int64   `json:"entries"`
	Mode                string  `json:"mode"`
	Quick               bool    `json:"quick"`
}

// runFanout: inbox entries written per second through the whole send path
// (client → gateway → SEND → fanout → Postgres + INBOX → STORED), senders
// each on their own conversation keeping a window of sends in flight (as
// BenchmarkSendPath), against the baseline of raw async JetStream
// publishes of the same number of inbox entries (same payload, headers and
// dedupe ids as the fanout writes) into copies of the INBOX streams
// (BenchmarkRawInboxPublish). Order: warm-up sends, baseline, send path.
func runFanout(ctx context.Context, o *opts) (any, error) {
	group := orDefault(o.group, 10)
	if group < 2 {
		return nil, errors.New("--group: at least 2")
	}
	msgs := orDefault(o.msgs, pick(o.quick, 2000, max(600_000/group, o.senders*100)))
	per := max(msgs/o.senders, 1)
	sys, err := startSystem(ctx, o.sys)
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	p, err := startPool(1, o.sys.verbose)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	var senders []sender
	for s := 0; s < o.senders; s++ {
		base := int64(3_000_000 + s*1000)
		members := make([]int64, group)
		for i := range members {
			members[i] = base + int64(i)
		}
		conv, err := sys.createConv(ctx, group > 2, members...)
		if err != nil {
			return nil, err
		}
		senders = append(senders, sender{UID: base, Conv: conv, Count: per})
	}
	const text = "benchmark message body of a typical length"
	warm := slices.Clone(senders)
	for i := range warm {
		warm[i].Count = min(per, 100)
	}
	logf(o.sys.verbose, "fanout: warm-up")
	if err := p[0].call("send", sendArgs{target: sys.target(""), Senders: warm, Window: o.window, Text: text, Prefix: "w"}, nil); err != nil {
		return nil, err
	}
	entries := int64(per * o.senders * group)
	logf(o.sys.verbose, "fanout: baseline, %d raw publishes", entries)
	cleanup, err := sys.copyInboxStreams(ctx)
	if err != nil {
		return nil, err
	}
	var raw sendResult
	err = p[0].call("rawpub", rawPubArgs{natsTarget: sys.natsTarget(), Prefix: "benchraw", Partitions: o.sys.partitions,
		Count: int(entries), Users: 1000, MaxPending: o.maxPending, Tag: "r"}, &raw)
	cleanup()
	if err != nil {
		return nil, err
	}
	logf(o.sys.verbose, "fanout: send path, %d messages to groups of %d", per*o.senders, group)
	profileWave(o.profile, sys, 5*time.Second)
	var sr sendResult
	if err := p[0].call("send", sendArgs{target: sys.target(""), Senders: senders, Window: o.window, Text: text, Prefix: "m"}, &sr); err != nil {
		return nil, err
	}
	res := fanoutResult{Scenario: "fanout", Group: group, Senders: o.senders, Msgs: sr.Msgs, Entries: sr.Msgs * int64(group),
		Mode: modeName(o), Quick: o.quick}
	res.MsgsPerS = rate(sr.Msgs, sr.StartNs, sr.EndNs)
	res.EntriesPerS = rate(sr.Msgs*int64(group), sr.StartNs, sr.EndNs)
	res.BaselinePublishPerS = rate(raw.Msgs, raw.StartNs, raw.EndNs)
	res.Ratio = ratio(res.EntriesPerS, res.BaselinePublishPerS)
	return res, nil
}

// ---------------------------------------------------------------- storm

// stormSetup is a seeded login storm: devices registered (each logged in
// once, so it has a cursor), then gone offline while its backlog was sent.
type stormSetup struct {
	users, backlog int
	groups         [][]int64       // msg_ids per seeding group, in conv_seq order
	devices        [][]stormDevice // per storm worker
	pool           pool
}

// prepareStorm registers U devices (uids 1..U, device "storm") and gives
// each exactly B offline messages: the users are split into group
// conversations of --seed-group members plus one sender (uid 1,000,000+g,
// not a storm user) that sends B messages to its group through the real
// send path. The msg_ids from the STORED answers are what every member of
// the group must receive; the storm checks each device against them.
func prepareStorm(ctx context.Context, o *opts, sys *system, users, backlog int) (*stormSetup, error) {
	st := &stormSetup{users: users, backlog: backlog}
	nw := orDefault(o.workers, workersFor(users))
	var err error
	if st.pool, err = startPool(nw, o.sys.verbose); err != nil {
		return nil, err
	}
	G := max(o.seedGroup, 1)
	ng := (users + G - 1) / G
	convs := make([]int64, ng)
	var senders []sender
	for g := 0; g < ng; g++ {
		members := []int64{int64(1_000_000 + g)}
		for u := g*G + 1; u <= min((g+1)*G, users); u++ {
			members = append(members, int64(u))
		}
		if convs[g], err = sys.createConv(ctx, true, members...); err != nil {
			return st, err
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
	err = st.pool.each(func(i int, w *workerProc) error {
		var hr holdResult
		if err := w.call("hold", holdArgs{target: sys.target(o.kind), From: int64(ranges[i][0] + 1), To: int64(ranges[i][1] + 1),
			Device: "storm", Concurrency: 128, Attempts: 10, CloseAfter: true}, &hr); err != nil {
			return err
		}
		if hr.Failed > 0 {
			return fmt.Errorf("registration: %d devices failed: %s", hr.Failed, hr.FirstErr)
		}
		return nil
	})
	if err != nil {
		return st, err
	}
	logf(o.sys.verbose, "storm: seeding %d messages to %d groups", ng*backlog, ng)
	var sr sendResult
	if err := st.pool[0].call("send", sendArgs{target: sys.target(""), Senders: senders, Window: 64,
		Text: "offline message", Prefix: "seed", Collect: true}, &sr); err != nil {
		return st, err
	}
	st.groups = make([][]int64, ng)
	for g, c := range convs {
		st.groups[g] = sr.IDs[strconv.FormatInt(c, 10)]
		if len(st.groups[g]) != backlog {
			return st, fmt.Errorf("seeding: group %d stored %d of %d messages", g, len(st.groups[g]), backlog)
		}
	}
	logf(o.sys.verbose, "storm: seeded at %.0f msgs/s; waiting for the archiver", rate(sr.Msgs, sr.StartNs, sr.EndNs))
	if err := sys.waitArchived(ctx, 10*time.Minute); err != nil {
		return st, err
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
		agg.add(r)
		agg.firstPage = append(agg.firstPage, r.FirstPage)
		agg.drained = append(agg.drained, r.Drained)
	}
	return agg, t0, err
}

func (a *stormAgg) add(r stormResult) {
	a.res.Devices += r.Devices
	a.res.Expected += r.Expected
	a.res.Received += r.Received
	a.res.Lost += r.Lost
	a.res.Dup += r.Dup
	a.res.Unexpected += r.Unexpected
	a.res.Incomplete += r.Incomplete
	a.res.DialFailed += r.DialFailed
	a.res.DialRetries += r.DialRetries
	a.res.LastNs = max(a.res.LastNs, r.LastNs)
	if a.res.StartNs == 0 || (r.StartNs != 0 && r.StartNs < a.res.StartNs) {
		a.res.StartNs = r.StartNs
	}
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
		agg.add(r)
	}
	return agg, err
}

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
	if o.quick && o.seedGroup == 100 {
		o.seedGroup = 20
	}
	sys, err := startSystem(ctx, o.sys)
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	st, err := prepareStorm(ctx, o, sys, users, backlog)
	if st != nil && st.pool != nil {
		defer st.pool.stop()
	}
	if err != nil {
		return nil, err
	}
	logf(o.sys.verbose, "storm: %d devices × %d messages connect", users, backlog)
	profileWave(o.profile, sys, 2*time.Second)
	agg, t0, err := st.run(o, sys)
	if err != nil {
		return nil, err
	}
	logf(o.sys.verbose, "storm: baseline (JetStream ordered consumers)")
	base, err := st.baseline(o, sys)
	if err != nil {
		return nil, err
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

// ---------------------------------------------------------------- live

type liveOut struct {
	Scenario    string  `json:"scenario"`
	IdleP50Ms   float64 `json:"idle_p50_ms"`
	IdleP99Ms   float64 `json:"idle_p99_ms"`
	StormP50Ms  float64 `json:"storm_p50_ms"`
	StormP99Ms  float64 `json:"storm_p99_ms"`
	StormMaxMs  float64 `json:"storm_max_ms"`
	Lost        int64   `json:"lost"`       // STORED, never received
	NotStored   int64   `json:"not_stored"` // sends without STORED (failed or unanswered in 2 min)
	IdleMaxMs   float64 `json:"idle_max_ms"`
	IdleMsgs    int64   `json:"idle_msgs"`
	StormMsgs   int64   `json:"storm_msgs"`
	Dup         int64   `json:"dup_after_dedupe"`
	Rate        float64 `json:"rate"`
	Pairs       int     `json:"pairs"`
	StormUsers  int     `json:"storm_users"`
	Backlog     int     `json:"storm_backlog"`
	StormDrainS float64 `json:"storm_drain_s"`
	StormLost   int64   `json:"storm_lost"`
	Mode        string  `json:"mode"`
	Quick       bool    `json:"quick"`
}

// runLive: --pairs direct conversations, a sender and a connected receiver
// each; messages go out on an open-loop schedule at --rate (round robin
// over the pairs) and their latency runs from the scheduled send time to
// the receiver's handler. The idle window is --idle with nothing else
// going on; the storm window runs from the storm's t0 (every device's
// intended connect time) to the storm's last message handed over, while
// --users devices with --backlog offline messages each log in and drain.
// A message belongs to the window its scheduled time falls in. The live
// pairs run in their own worker process, apart from the storm's devices.
func runLive(ctx context.Context, o *opts) (any, error) {
	users := orDefault(o.users, pick(o.quick, 60, 10_000))
	backlog := orDefault(o.backlog, pick(o.quick, 20, 200))
	r := orDefault(o.rate, pick(o.quick, 100.0, 200.0))
	idle := orDefault(o.idle, pick(o.quick, 2*time.Second, 10*time.Second))
	pairs := pick(o.quick, min(o.pairs, 5), o.pairs)
	if o.quick && o.seedGroup == 100 {
		o.seedGroup = 20
	}
	sys, err := startSystem(ctx, o.sys)
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	st, err := prepareStorm(ctx, o, sys, users, backlog)
	if st != nil && st.pool != nil {
		defer st.pool.stop()
	}
	if err != nil {
		return nil, err
	}
	lp, err := startPool(1, o.sys.verbose)
	if err != nil {
		return nil, err
	}
	defer lp.stop()
	var lps []livePair
	for i := 0; i < pairs; i++ {
		s, rcv := int64(2_000_000+i), int64(2_100_000+i)
		conv, err := sys.createConv(ctx, false, s, rcv)
		if err != nil {
			return nil, err
		}
		lps = append(lps, livePair{S: s, R: rcv, Conv: conv})
	}
	if err := lp[0].call("live_start", liveArgs{target: sys.target("desktop"), Pairs: lps, Rate: r}, nil); err != nil {
		return nil, err
	}
	// A warm-up second (first logins of the pairs settle), then idle.
	time.Sleep(pick(o.quick, 500*time.Millisecond, 2*time.Second))
	idleFrom := time.Now().UnixNano()
	logf(o.sys.verbose, "live: idle window %s at %.0f msgs/s", idle, r)
	select {
	case <-time.After(idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	logf(o.sys.verbose, "live: storm of %d devices × %d messages", users, backlog)
	agg, t0, err := st.run(o, sys)
	if err != nil {
		return nil, err
	}
	stormTo := max(agg.res.LastNs, t0+1)
	var lr liveStopResult
	if err := lp[0].call("live_stop", liveStopArgs{Windows: []liveWindow{
		{Name: "idle", From: idleFrom, To: t0}, {Name: "storm", From: t0, To: stormTo}, {Name: "all", From: idleFrom, To: stormTo},
	}}, &lr); err != nil {
		return nil, err
	}
	out := liveOut{Scenario: "live", Rate: r, Pairs: pairs, StormUsers: users, Backlog: backlog, StormLost: agg.res.Lost,
		Dup: lr.Dup, Mode: modeName(o), Quick: o.quick}
	out.StormDrainS = round3(float64(stormTo-t0) / 1e9)
	idleW, stormW := lr.Windows["idle"], lr.Windows["storm"]
	hi, hs := mergeHists(idleW.Hist), mergeHists(stormW.Hist)
	writeCDF(o, "live-idle.tsv", hi)
	writeCDF(o, "live-storm.tsv", hs)
	out.IdleP50Ms, out.IdleP99Ms, out.IdleMaxMs, out.IdleMsgs = ms(hi, 50), ms(hi, 99), maxMs(hi), idleW.Received
	out.StormP50Ms, out.StormP99Ms, out.StormMaxMs, out.StormMsgs = ms(hs, 50), ms(hs, 99), maxMs(hs), stormW.Received
	out.Lost = lr.Windows["all"].Lost
	out.NotStored = lr.Windows["all"].Scheduled - lr.Windows["all"].Stored
	return out, nil
}

// ---------------------------------------------------------------- conns

type connsOut struct {
	Scenario           string  `json:"scenario"`
	Connections        int     `json:"connections"`
	RSSBytesPerConn    float64 `json:"rss_bytes_per_conn"`
	GoHeapBytesPerConn float64 `json:"go_heap_bytes_per_conn"`
	HandshakesPerS     float64 `json:"handshakes_per_s"`
	Requested          int     `json:"requested"`
	Failed             int     `json:"failed"`
	GatewayReports     float64 `json:"gateway_connections_metric"`
	HandshakeP50Ms     float64 `json:"handshake_p50_ms"`
	HandshakeP99Ms     float64 `json:"handshake_p99_ms"`
	RSSBefore          int64   `json:"rss_bytes_before"`
	RSSAfter           int64   `json:"rss_bytes_after"`
	Process            string  `json:"process"`
	FreshDevices       bool    `json:"fresh_devices"`
	Workers            int     `json:"workers"`
	Mode               string  `json:"mode"`
	Quick              bool    `json:"quick"`
}

// runConns: N idle connections (distinct users, TCP) held by one gateway
// process. By default the devices are returning ones (each logged in once
// before the measurement, as after a gateway restart); --fresh-devices
// measures first logins, which also create each device's cursor consumer. RSS and Go heap are read before and after (each after a forced
// GC, the connections settled) and divided by N. It runs --split unless
// --split is given explicitly: all-in-one, the gateway's process also
// holds the NATS server and its per-device consumers.
func runConns(ctx context.Context, o *opts) (any, error) {
	n := orDefault(o.n, pick(o.quick, 200, 19_000))
	if !o.splitSet && o.sys.url == "" {
		o.sys.split = true
	}
	nw := orDefault(o.workers, pick(o.quick, 2, workersFor(n)))
	sys, err := startSystem(ctx, o.sys)
	if err != nil {
		return nil, err
	}
	defer sys.stop()
	p, err := startPool(nw, o.sys.verbose)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	ranges := split(n, nw)
	if !o.freshDevices {
		// Returning devices (a gateway restart's reconnect wave): each
		// device logged in once before, so its cursor consumer exists.
		logf(o.sys.verbose, "conns: registering %d devices", n)
		err = p.each(func(i int, w *workerProc) error {
			var hr holdResult
			if err := w.call("hold", holdArgs{target: sys.target("desktop"), From: int64(ranges[i][0] + 1), To: int64(ranges[i][1] + 1),
				Device: "idle", Concurrency: o.dialConc, Attempts: 10, CloseAfter: true}, &hr); err != nil {
				return err
			}
			if hr.Failed > 0 {
				return fmt.Errorf("registration: %d failed: %s", hr.Failed, hr.FirstErr)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		time.Sleep(pick(o.quick, 200*time.Millisecond, 2*time.Second)) // closes settle
	}
	pid := sys.gwPid()
	measure := func() (rssB int64, heap float64) {
		if sys.gw != nil {
			forceGC(sys.gw.ops)
			heap, _ = metric(sys.gw.ops, "go_memstats_heap_inuse_bytes")
		}
		if pid != 0 {
			rssB, _ = rss(pid)
		}
		return
	}
	rss0, heap0 := measure()
	results := make([]holdResult, nw)
	profileWave(o.profile, sys, 4*time.Second)
	logf(o.sys.verbose, "conns: %d connections from %d workers", n, nw)
	err = p.each(func(i int, w *workerProc) error {
		return w.call("hold", holdArgs{target: sys.target("desktop"), From: int64(ranges[i][0] + 1), To: int64(ranges[i][1] + 1),
			Device: "idle", Concurrency: o.dialConc, Attempts: 1}, &results[i])
	})
	if err != nil {
		return nil, err
	}
	out := connsOut{Scenario: "conns", Requested: n, Workers: nw, Mode: modeName(o), Quick: o.quick, Process: "gateway",
		FreshDevices: o.freshDevices}
	if !o.sys.split && o.sys.url == "" {
		out.Process = "inboxd (all-in-one: includes NATS)"
	}
	var start, end int64
	var hs []string
	for _, r := range results {
		out.Connections += r.Connected
		out.Failed += r.Failed
		if start == 0 || r.StartNs < start {
			start = r.StartNs
		}
		end = max(end, r.EndNs)
		hs = append(hs, r.Handshake)
		if r.FirstErr != "" {
			logf(true, "conns: worker: %d failed, first: %s", r.Failed, r.FirstErr)
		}
	}
	out.HandshakesPerS = rate(int64(out.Connections), start, end)
	h := mergeHists(hs...)
	out.HandshakeP50Ms, out.HandshakeP99Ms = ms(h, 50), ms(h, 99)
	time.Sleep(pick(o.quick, 500*time.Millisecond, 3*time.Second)) // let logins finish their background work
	rss1, heap1 := measure()
	if o.profile != "" && sys.gw != nil {
		saveProfiles(o.profile, sys.gw.ops, "conns")
	}
	out.RSSBefore, out.RSSAfter = rss0, rss1
	if sys.gw != nil {
		out.GatewayReports, _ = metric(sys.gw.ops, "inboxd_gateway_connections")
	}
	if out.Connections > 0 {
		if pid != 0 {
			out.RSSBytesPerConn = round3(float64(rss1-rss0) / float64(out.Connections))
		}
		if sys.gw != nil {
			out.GoHeapBytesPerConn = round3((heap1 - heap0) / float64(out.Connections))
		}
	}
	logf(o.sys.verbose, "conns: releasing")
	_ = p.each(func(i int, w *workerProc) error { return w.call("release", nil, nil) })
	return out, nil
}

// ---------------------------------------------------------------- scale

type scaleOut struct {
	Scenario     string  `json:"scenario"`
	DrainMsSmall float64 `json:"drain_ms_small"`
	DrainMsLarge float64 `json:"drain_ms_large"`
	Ratio        float64 `json:"ratio"`
	EntriesSmall uint64  `json:"entries_small"`
	EntriesLarge uint64  `json:"entries_large"`
	Backlog      int     `json:"backlog"`
	Samples      int     `json:"samples"`
	Mode         string  `json:"mode"`
	Quick        bool    `json:"quick"`
}

// runScale: how one device's drain of its B-message backlog changes with
// the total size of the INBOX (BenchmarkCatchUpScale as a tool). Each size
// gets a fresh installation: 20 background groups of 100 users take most
// of the traffic, and uid 2 gets B direct messages spread evenly through
// it; --samples devices of uid 2, registered before any traffic, then
// connect one after the other and the median connect-to-last-message time
// is reported. The baseline is the same measurement at the small size.
func runScale(ctx context.Context, o *opts) (any, error) {
	if o.sys.url != "" {
		return nil, errors.New("scale needs fresh installations: not available with --url")
	}
	small := orDefault(o.small, pick(o.quick, 3000, 100_000))
	large := orDefault(o.large, pick(o.quick, 12_000, 2_000_000))
	backlog := orDefault(o.backlog, pick(o.quick, 20, 200))
	samples := pick(o.quick, min(o.samples, 2), o.samples)
	out := scaleOut{Scenario: "scale", Backlog: backlog, Samples: samples, Mode: modeName(o), Quick: o.quick}
	var err error
	if out.DrainMsSmall, out.EntriesSmall, err = scaleOne(ctx, o, small, backlog, samples); err != nil {
		return nil, err
	}
	if out.DrainMsLarge, out.EntriesLarge, err = scaleOne(ctx, o, large, backlog, samples); err != nil {
		return nil, err
	}
	out.Ratio = ratio(out.DrainMsLarge, out.DrainMsSmall)
	return out, nil
}

func scaleOne(ctx context.Context, o *opts, total, backlog, samples int) (float64, uint64, error) {
	sys, err := startSystem(ctx, o.sys)
	if err != nil {
		return 0, 0, err
	}
	defer sys.stop()
	p, err := startPool(1, o.sys.verbose)
	if err != nil {
		return 0, 0, err
	}
	defer p.stop()
	const group = 100
	direct, err := sys.createConv(ctx, false, 1, 2)
	if err != nil {
		return 0, 0, err
	}
	var groups []int64
	for g := 0; g < 20; g++ {
		members := []int64{9999}
		for i := 1; i < group; i++ {
			members = append(members, int64(10000+g*group+i))
		}
		c, err := sys.createConv(ctx, true, members...)
		if err != nil {
			return 0, 0, err
		}
		groups = append(groups, c)
	}
	for i := 0; i < samples; i++ {
		var hr holdResult
		if err := p[0].call("hold", holdArgs{target: sys.target("desktop"), From: 2, To: 3, Device: "s" + strconv.Itoa(i),
			Concurrency: 1, Attempts: 10, CloseAfter: true}, &hr); err != nil {
			return 0, 0, err
		}
		if hr.Failed > 0 {
			return 0, 0, fmt.Errorf("register: %s", hr.FirstErr)
		}
	}
	per := max((total-2*backlog)/group/backlog, 0)
	logf(o.sys.verbose, "scale: seeding ~%d entries", per*backlog*group+2*backlog)
	if err := p[0].call("seedscale", seedScaleArgs{target: sys.target(""), BgUID: 9999, Groups: groups, DirectUID: 1, DirectConv: direct,
		Backlog: backlog, Per: per, Window: 512}, nil); err != nil {
		return 0, 0, err
	}
	if err := sys.waitArchived(ctx, 10*time.Minute); err != nil {
		return 0, 0, err
	}
	entries, err := sys.totalInboxEntries(ctx)
	if err != nil {
		return 0, 0, err
	}
	var times []float64
	for i := 0; i < samples; i++ {
		var dr drain1Result
		if err := p[0].call("drain1", drain1Args{target: sys.target("desktop"), UID: 2, Device: "s" + strconv.Itoa(i), Expect: backlog,
			TimeoutMs: o.timeout.Milliseconds()}, &dr); err != nil {
			return 0, 0, err
		}
		times = append(times, dr.Ms)
	}
	slices.Sort(times)
	logf(o.sys.verbose, "scale: %d entries: drains %v ms", entries, times)
	return times[len(times)/2], entries, nil
}
