package main

// The soak scenario (the data lifecycle): steady sends and syncs
// for --duration against an all-in-one system with short lifecycle
// settings, sampling what the disk holds. The driver (runSoak) starts the
// system, creates the conversations and samples the JetStream store, the
// database and the streams; one worker (soak_start, soak_sample,
// soak_stop) holds every device, sends, takes cohorts of devices offline
// in waves and measures how fast each returning wave catches up, and at
// the end checks that every stored message reached every member's device
// (or was expired by retention, counted apart).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/client"
)

// ---------------------------------------------------------------- driver

// soakSample is the system at one instant (t_s after the sends started)
// and what happened since the previous sample.
type soakSample struct {
	TS float64 `json:"t_s"`
	// Disk, measured: the JetStream file store (du of the data dir's
	// jetstream directory), the database (pg_database_size) and its
	// tables (with indexes and TOAST; a partitioned table sums its
	// partitions).
	JSStoreBytes      int64            `json:"js_store_bytes"`
	PGDatabaseBytes   int64            `json:"pg_database_bytes"`
	MsgContentBytes   int64            `json:"msg_content_bytes"`
	InboxArchiveBytes int64            `json:"inbox_archive_bytes"`
	Tables            map[string]int64 `json:"tables"`
	// What the streams say they hold.
	InboxMsgs   uint64 `json:"inbox_msgs"`
	InboxBytes  uint64 `json:"inbox_bytes"`
	StreamMsgs  uint64 `json:"stream_msgs"`
	StreamBytes uint64 `json:"stream_bytes"`
	// Since the previous sample.
	SendRate        float64            `json:"send_rate"` // messages stored per second
	SendP50Ms       float64            `json:"send_p50_ms"`
	SendP99Ms       float64            `json:"send_p99_ms"`
	NotStored       int64              `json:"not_stored"`
	ReceivedPerS    float64            `json:"received_per_s"`
	CatchupPerS     float64            `json:"catchup_entries_per_s"` // waves that finished in the interval: their median device's backlog entries / catch-up time
	Waves           int                `json:"waves"`
	Offline         int                `json:"devices_offline"`
	Load1           float64            `json:"load1"` // the machine's 1-minute load average
	ServerRSSBytes  int64              `json:"server_rss_bytes"`
	LifecycleMetric map[string]float64 `json:"lifecycle_metrics,omitempty"`
}

// soakWaveOut is one wave of returning devices.
type soakWaveOut struct {
	BackS      float64 `json:"back_s"` // when the devices came back (since the sends started)
	Devices    int     `json:"devices"`
	Entries    int64   `json:"entries"`                  // backlog: stored while they were away, not yet theirs
	Expired    int64   `json:"expired"`                  // of them, expired by retention meanwhile (never handed over)
	DrainS     float64 `json:"drain_s"`                  // back → the last backlog message handed over
	PerS       float64 `json:"entries_per_s"`            // the wave: (entries - expired) / drain_s
	DevicePerS float64 `json:"device_p50_entries_per_s"` // the median device: its entries / back → its last one
	Incomplete int     `json:"incomplete"`               // devices that had not caught up when they left again
	Load1      float64 `json:"load1"`                    // the machine's 1-minute load average when they came back
}

// soakLevel says whether a disk series levelled off: its samples from
// FromS on, their least-squares slope against the slope before FromS.
type soakLevel struct {
	FromS       float64 `json:"from_s"`
	Min         int64   `json:"min"`
	Max         int64   `json:"max"`
	MaxMin      float64 `json:"max_min"`
	SlopeEarly  float64 `json:"slope_early_bytes_per_min"`
	SlopeSteady float64 `json:"slope_steady_bytes_per_min"`
}

type soakOut struct {
	Scenario        string        `json:"scenario"`
	DurationS       float64       `json:"duration_s"`
	SendRateStart   float64       `json:"send_rate_start"`
	SendRateEnd     float64       `json:"send_rate_end"`
	SendRateRatio   float64       `json:"send_rate_ratio"`
	CatchupStart    float64       `json:"catchup_start_entries_per_s"`
	CatchupEnd      float64       `json:"catchup_end_entries_per_s"`
	CatchupRatio    float64       `json:"catchup_ratio"`
	JSStoreStart    int64         `json:"js_store_bytes_start"`
	JSStoreEnd      int64         `json:"js_store_bytes_end"`
	PGStart         int64         `json:"pg_database_bytes_start"`
	PGEnd           int64         `json:"pg_database_bytes_end"`
	JSLevel         soakLevel     `json:"js_store_level"`
	PGLevel         soakLevel     `json:"pg_database_level"`
	Stored          int64         `json:"stored"`
	Lost            int64         `json:"lost"`
	Expired         int64         `json:"expired"`
	Dup             int64         `json:"dup_after_dedupe"`
	NotStored       int64         `json:"not_stored"`
	Unexpected      int64         `json:"unexpected"`
	OutOfOrder      int64         `json:"out_of_order"`
	Late            int64         `json:"late"`
	Entries         int64         `json:"entries"` // stored messages × members
	SendP99MsStart  float64       `json:"send_p99_ms_start"`
	SendP99MsEnd    float64       `json:"send_p99_ms_end"`
	Rate            float64       `json:"rate"`
	Users           int           `json:"users"`
	Senders         int           `json:"senders"`
	Convs           int           `json:"convs"`
	OfflineS        float64       `json:"offline_s"`
	HotWindowS      float64       `json:"hot_window_s"`
	RetentionS      float64       `json:"retention_s"`
	PartitionWidthS float64       `json:"partition_width_s"`
	CleanupEveryS   float64       `json:"cleanup_every_s"`
	ServerFlags     []string      `json:"server_flags"`
	Mode            string        `json:"mode"`
	Quick           bool          `json:"quick"`
	Waves           []soakWaveOut `json:"waves"`
	Samples         []soakSample  `json:"samples"`
}

// soakPlan is the soak's settings with its defaults applied.
type soakPlan struct {
	duration, sampleEvery, offline            time.Duration
	hotWindow, retention, width, cleanupEvery time.Duration
	rate                                      float64
	users, senders                            int
	serverFlags                               []string
}

// soakPlan resolves the soak's settings. A lifecycle setting left unset gets
// the soak's short default only where the scenario needs one to mean
// anything (a partition width that lets retention drop ranges within the
// run, cleanup every few seconds); set to 0 it is not passed at all and
// the server's own default holds.
func (o *opts) soakPlan() soakPlan {
	p := soakPlan{
		duration:    orDefault(o.duration, pick(o.quick, 15*time.Second, 10*time.Minute)),
		sampleEvery: orDefault(o.sampleEvery, pick(o.quick, 2*time.Second, time.Minute)),
		offline:     orDefault(o.offline, pick(o.quick, 4*time.Second, 90*time.Second)),
		rate:        orDefault(o.rate, pick(o.quick, 50.0, 200.0)),
		users:       orDefault(o.users, pick(o.quick, 40, 200)),
		senders:     pick(o.quick, min(o.senders, 4), o.senders),
	}
	set := func(name string, v, def time.Duration) time.Duration {
		if o.set[name] {
			return v
		}
		return def
	}
	p.hotWindow = set("hot-window", o.hotWindow, pick(o.quick, 3*time.Second, 0))
	p.retention = set("retention", o.retention, pick(o.quick, 8*time.Second, 0))
	// Five ranges in a retention period: the database holds between
	// retention and 1.2 × retention of messages.
	p.width = set("partition-width", o.partitionWidth, max(p.retention/5, time.Second).Round(time.Second))
	if p.retention == 0 && !o.set["partition-width"] {
		p.width = 0
	}
	p.cleanupEvery = set("cleanup-every", o.cleanupEvery, pick(o.quick, time.Second, 5*time.Second))
	flag := func(name string, d time.Duration) {
		if d > 0 {
			p.serverFlags = append(p.serverFlags, "--"+name, d.String())
		}
	}
	flag("hot-window", p.hotWindow)
	flag("retention", p.retention)
	flag("partition-width", p.width)
	flag("cleanup-every", p.cleanupEvery)
	if p.cleanupEvery > 0 {
		// Early cleanup keeps a new device's window (the last
		// --new-device-window, at most --new-device-max entries, as it was
		// --cleanup-margin ago); the server's defaults (7 days, 1,000
		// entries, 1 minute) would keep everything a soak sends. The margin
		// is the shortest the server takes.
		flag("cleanup-margin", 2*time.Second)
		flag("new-device-window", pick(o.quick, 2*time.Second, 10*time.Second))
		p.serverFlags = append(p.serverFlags, "--new-device-max", strconv.Itoa(pick(o.quick, 10, 50)))
	}
	return p
}

// runSoak: --users receiving devices (uids 5,100,001…) and --senders
// sending ones (5,000,001…), every one a real client that confirms what
// it gets. Each receiver has a direct conversation with a sender and is in
// two groups of five (a sender and four receivers). Messages go out on an
// open-loop schedule at --rate, round robin over the conversations, each
// from its conversation's sender. A fifth of the receivers stay online;
// the others form four cohorts: every --offline/2 one cohort leaves and the
// one that left --offline ago comes back, and its catch-up is timed (per
// device: its backlog entries / the time from its return to the last of
// them; a wave's figure is its median device). Every --sample-every (and at the start and the end) the driver
// samples the disk and the streams. At the end the sends stop, every
// device comes back, and each member's device must have every message
// stored in its conversations: one it lacks is lost, unless retention
// expired it (the client learned the conversation's horizon), which is
// counted as expired.
func runSoak(ctx context.Context, o *opts) (any, error) {
	if o.sys.split || o.sys.url != "" {
		return nil, errors.New("soak: all-in-one only (it measures the JetStream store in the data dir and the database it creates)")
	}
	p := o.soakPlan()
	if p.users < 5 || p.senders < 1 {
		return nil, fmt.Errorf("soak: --users %d and --senders %d: want at least 5 and 1", p.users, p.senders)
	}
	o.sys.extra = append(o.sys.extra, p.serverFlags...)
	sys, pl, stop, err := startWith(ctx, o, 1)
	if err != nil {
		return nil, err
	}
	defer stop()
	pg, err := pgx.Connect(ctx, sys.dbURL)
	if err != nil {
		return nil, fmt.Errorf("soak: postgres %s: %w", sys.dbName, err)
	}
	defer pg.Close(context.Background())

	args, err := soakLayout(ctx, sys, p)
	if err != nil {
		return nil, err
	}
	logf(o.sys.verbose, "soak: %d conversations, %d receivers, %d senders, %.0f msgs/s for %s; server %v",
		len(args.Convs), p.users, p.senders, p.rate, p.duration, p.serverFlags)
	var samples []soakSample
	var waves []soakWaveOut
	sample := func(t0 time.Time, iv *soakInterval, dt time.Duration) error {
		s, err := sampleSystem(ctx, sys, pg)
		if err != nil {
			return err
		}
		s.TS = round3(time.Since(t0).Seconds())
		if iv != nil {
			s.fill(iv, dt)
			waves = append(waves, iv.waveOuts(t0)...)
		}
		samples = append(samples, s)
		logf(o.sys.verbose, "soak: t=%.0fs js %s pg %s (msg_content %s, inbox_archive %s) inbox %d msgs; send %.1f/s p99 %.1f ms; catch-up %.0f/s (%d waves), %d offline",
			s.TS, mib(s.JSStoreBytes), mib(s.PGDatabaseBytes), mib(s.MsgContentBytes), mib(s.InboxArchiveBytes), s.InboxMsgs,
			s.SendRate, s.SendP99Ms, s.CatchupPerS, s.Waves, s.Offline)
		return nil
	}
	if err := pl[0].call("soak_start", args, nil); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := sample(t0, nil, 0); err != nil {
		return nil, err
	}
	last := t0
	for k := 1; ; k++ {
		next := t0.Add(time.Duration(k) * p.sampleEvery)
		if end := t0.Add(p.duration); next.After(end) {
			next = end
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Until(next)):
		}
		var iv soakInterval
		if err := pl[0].call("soak_sample", none{}, &iv); err != nil {
			return nil, err
		}
		if err := sample(t0, &iv, time.Since(last)); err != nil {
			return nil, err
		}
		last = time.Now()
		if !next.Before(t0.Add(p.duration)) {
			break
		}
	}
	logf(o.sys.verbose, "soak: sends stop; every device comes back and must have every stored message")
	var fin soakFinal
	if err := pl[0].call("soak_stop", none{}, &fin); err != nil {
		return nil, err
	}
	out := soakOut{Scenario: "soak", DurationS: round3(p.duration.Seconds()), Rate: p.rate, Users: p.users, Senders: p.senders,
		Convs: len(args.Convs), OfflineS: p.offline.Seconds(), HotWindowS: p.hotWindow.Seconds(), RetentionS: p.retention.Seconds(),
		PartitionWidthS: p.width.Seconds(), CleanupEveryS: p.cleanupEvery.Seconds(), ServerFlags: p.serverFlags,
		Stored: fin.Stored, Lost: fin.Lost, Expired: fin.Expired, Dup: fin.Dup, NotStored: fin.NotStored, Unexpected: fin.Unexpected,
		OutOfOrder: fin.OutOfOrder, Late: fin.Late, Entries: fin.Entries, Mode: modeName(o), Quick: o.quick, Waves: waves, Samples: samples}
	first, end := samples[0], samples[len(samples)-1]
	out.JSStoreStart, out.JSStoreEnd = first.JSStoreBytes, end.JSStoreBytes
	out.PGStart, out.PGEnd = first.PGDatabaseBytes, end.PGDatabaseBytes
	if len(samples) > 1 {
		out.SendRateStart, out.SendRateEnd = samples[1].SendRate, end.SendRate
		out.SendRateRatio = ratio(out.SendRateEnd, out.SendRateStart)
		out.SendP99MsStart, out.SendP99MsEnd = samples[1].SendP99Ms, end.SendP99Ms
	}
	out.CatchupStart, out.CatchupEnd = catchupEnds(waves)
	out.CatchupRatio = ratio(out.CatchupEnd, out.CatchupStart)
	jsFrom := max(2*p.hotWindow, pick(o.quick, 0, 3*time.Minute))
	pgFrom := pick(o.quick, 0, 3*time.Minute)
	if p.retention > 0 {
		pgFrom = p.retention + 2*p.width
	}
	out.JSLevel = level(samples, jsFrom, p, func(s soakSample) int64 { return s.JSStoreBytes })
	out.PGLevel = level(samples, pgFrom, p, func(s soakSample) int64 { return s.PGDatabaseBytes })
	writeSoakPlot(o, samples, waves)
	return out, nil
}

// catchupEnds is the catch-up speed at the start and at the end: of the
// waves with a backlog that every device caught up on, the median device's
// speed, the median of the first and of the last third of the waves (one
// wave alone is at the mercy of the machine's noise).
func catchupEnds(waves []soakWaveOut) (start, end float64) {
	var ok []float64
	for _, w := range waves {
		if w.Entries > w.Expired && w.Incomplete == 0 && w.DevicePerS > 0 {
			ok = append(ok, w.DevicePerS)
		}
	}
	if len(ok) == 0 {
		return 0, 0
	}
	n := max(len(ok)/3, 1)
	return median(ok[:n]), median(ok[len(ok)-n:])
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return round3(s[len(s)/2])
	}
	return round3((s[len(s)/2-1] + s[len(s)/2]) / 2)
}

// level fits the series before and from `from` (clamped so that at least
// three samples are in the steady part).
func level(samples []soakSample, from time.Duration, p soakPlan, v func(soakSample) int64) soakLevel {
	fromS := min(from.Seconds(), p.duration.Seconds()-2*p.sampleEvery.Seconds())
	var early, steady []soakSample
	for _, s := range samples {
		if s.TS < fromS-0.5 {
			early = append(early, s)
		} else {
			steady = append(steady, s)
		}
	}
	if len(early) > 0 && len(steady) > 0 {
		early = append(early, steady[0]) // the early slope runs up to where the steady part starts
	}
	l := soakLevel{FromS: round3(max(fromS, 0))}
	for i, s := range steady {
		x := v(s)
		if i == 0 || x < l.Min {
			l.Min = x
		}
		l.Max = max(l.Max, x)
	}
	if l.Min > 0 {
		l.MaxMin = round3(float64(l.Max) / float64(l.Min))
	}
	l.SlopeEarly, l.SlopeSteady = slopePerMin(early, v), slopePerMin(steady, v)
	return l
}

// slopePerMin is the least-squares slope of v over the samples, per minute.
func slopePerMin(ss []soakSample, v func(soakSample) int64) float64 {
	if len(ss) < 2 {
		return 0
	}
	var sx, sy, sxx, sxy float64
	for _, s := range ss {
		x, y := s.TS/60, float64(v(s))
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(ss))
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return math.Round((n*sxy - sx*sy) / d)
}

// soakLayout creates the conversations: receiver i has a direct
// conversation with sender i mod S and is in two groups of a sender and
// four receivers (receivers 4g..4g+3 and, shifted by two, the next ones:
// every group mixes cohorts).
func soakLayout(ctx context.Context, sys *system, p soakPlan) (soakArgs, error) {
	a := soakArgs{target: sys.target("desktop"), Rate: p.rate, WaveEveryMs: (p.offline / 2).Milliseconds(), OfflineMs: p.offline.Milliseconds(),
		RetentionMs: p.retention.Milliseconds()}
	sender := func(i int) int64 { return int64(5_000_001 + i%p.senders) }
	recv := func(i int) int64 { return int64(5_100_001 + i%p.users) }
	for i := 0; i < p.users; i++ {
		s, r := sender(i), recv(i)
		id, err := sys.createConv(ctx, false, s, r)
		if err != nil {
			return a, err
		}
		a.Convs = append(a.Convs, soakConv{ID: id, Sender: s, Members: []int64{s, r}})
	}
	for shift := 0; shift < 2; shift++ {
		for g := 0; g < p.users/4; g++ {
			s := sender(g + shift)
			members := []int64{s}
			for k := 0; k < 4; k++ {
				members = append(members, recv(4*g+k+2*shift))
			}
			id, err := sys.createConv(ctx, true, members...)
			if err != nil {
				return a, err
			}
			a.Convs = append(a.Convs, soakConv{ID: id, Sender: s, Members: members})
		}
	}
	// Cohorts by uid: a fifth stays online, four cohorts take turns.
	a.Cohorts = make([][]int64, 4)
	for i := 0; i < p.users; i++ {
		if i%5 == 0 {
			a.Online = append(a.Online, recv(i))
		} else {
			a.Cohorts[i%5-1] = append(a.Cohorts[i%5-1], recv(i))
		}
	}
	for i := 0; i < p.senders; i++ {
		a.Online = append(a.Online, sender(i))
	}
	return a, nil
}

// sampleSystem measures the disk and the streams of sys.
func sampleSystem(ctx context.Context, sys *system, pg *pgx.Conn) (soakSample, error) {
	var s soakSample
	s.JSStoreBytes = du(filepath.Join(sys.dir, "jetstream"))
	if err := pg.QueryRow(ctx, "SELECT pg_database_size(current_database())").Scan(&s.PGDatabaseBytes); err != nil {
		return s, fmt.Errorf("soak: database size: %w", err)
	}
	// A partition counts in its root table; a table outside any
	// partition tree is its own root.
	rows, err := pg.Query(ctx, `
		SELECT coalesce(pg_partition_root(c.oid), c.oid)::regclass::text AS t,
		       coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind = 'r'
		GROUP BY 1`)
	if err != nil {
		return s, fmt.Errorf("soak: table sizes: %w", err)
	}
	s.Tables = map[string]int64{}
	for rows.Next() {
		var name string
		var b int64
		if err := rows.Scan(&name, &b); err != nil {
			return s, fmt.Errorf("soak: table sizes: %w", err)
		}
		s.Tables[name] = b
	}
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("soak: table sizes: %w", err)
	}
	s.MsgContentBytes, s.InboxArchiveBytes = s.Tables["msg_content"], s.Tables["inbox_archive"]
	lister := sys.js.ListStreams(ctx)
	for si := range lister.Info() {
		s.StreamMsgs += si.State.Msgs
		s.StreamBytes += si.State.Bytes
		if strings.HasPrefix(si.Config.Name, "INBOX_") {
			s.InboxMsgs += si.State.Msgs
			s.InboxBytes += si.State.Bytes
		}
	}
	if err := lister.Err(); err != nil {
		return s, fmt.Errorf("soak: stream info: %w", err)
	}
	s.Load1 = load1()
	if pid := sys.gwPid(); pid > 0 {
		s.ServerRSSBytes, _ = rss(pid)
	}
	if sys.gw != nil {
		s.LifecycleMetric = lifecycleMetrics(sys.gw.ops)
	}
	return s, nil
}

// fill adds the worker's interval to the sample.
func (s *soakSample) fill(iv *soakInterval, dt time.Duration) {
	sec := dt.Seconds()
	if sec <= 0 {
		return
	}
	h := mergeHists(iv.SendHist)
	s.SendRate = round3(float64(iv.Stored) / sec)
	s.SendP50Ms, s.SendP99Ms = ms(h, 50), ms(h, 99)
	s.NotStored = iv.NotStored
	s.ReceivedPerS = round3(float64(iv.Received) / sec)
	s.Offline = iv.Offline
	var rates []float64
	for _, w := range iv.Waves {
		if w.Entries == w.Expired || w.Incomplete > 0 || w.DeviceP50PerS == 0 {
			continue
		}
		rates = append(rates, w.DeviceP50PerS)
	}
	s.Waves = len(rates)
	if len(rates) > 0 {
		s.CatchupPerS = median(rates)
	}
}

func (iv *soakInterval) waveOuts(t0 time.Time) []soakWaveOut {
	var out []soakWaveOut
	for _, w := range iv.Waves {
		o := soakWaveOut{BackS: round3(float64(w.BackNs-t0.UnixNano()) / 1e9), Devices: w.Devices, Entries: w.Entries,
			Expired: w.Expired, Incomplete: w.Incomplete, DevicePerS: round3(w.DeviceP50PerS), Load1: w.Load1}
		if w.LastNs > w.BackNs {
			o.DrainS = round3(float64(w.LastNs-w.BackNs) / 1e9)
			o.PerS = round3(float64(w.Entries-w.Expired) / o.DrainS)
		}
		out = append(out, o)
	}
	return out
}

// du is the disk space the files under dir take (allocated blocks, as du
// counts them); files that go while it walks are skipped.
func du(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

func load1() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// lifecycleMetrics reads the lifecycle jobs' metrics from an ops server,
// each summed over its labels (histogram buckets left out).
func lifecycleMetrics(ops string) map[string]float64 {
	r, err := http.Get("http://" + ops + "/metrics")
	if err != nil {
		return nil
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return nil
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "inboxd_") {
			continue
		}
		name, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "{")
		if strings.HasSuffix(name, "_bucket") || !lifecycleMetric(name) {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			out[name] += v
		}
	}
	return out
}

func lifecycleMetric(name string) bool {
	for _, w := range []string{"archive", "trim", "cleanup", "retention", "housekeeping", "quarantine"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// writeSoakPlot writes the samples (soak-samples.jsonl, soak.tsv) and the
// waves (soak-waves.tsv) into --plot-data (docs/benchmarks/plots.gp).
func writeSoakPlot(o *opts, samples []soakSample, waves []soakWaveOut) {
	if o.plotDir == "" {
		return
	}
	_ = os.MkdirAll(o.plotDir, 0o755)
	var jl, tsv, wv strings.Builder
	fmt.Fprintln(&tsv, "# t_min\tjs_store_mib\tpg_database_mib\tmsg_content_mib\tinbox_archive_mib\tinbox_stream_mib\tsend_rate\tsend_p99_ms\tcatchup_entries_per_s")
	for _, s := range samples {
		b, _ := json.Marshal(s)
		jl.Write(append(b, '\n'))
		m := func(b int64) float64 { return float64(b) / (1 << 20) }
		fmt.Fprintf(&tsv, "%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\n", s.TS/60, m(s.JSStoreBytes), m(s.PGDatabaseBytes),
			m(s.MsgContentBytes), m(s.InboxArchiveBytes), m(int64(s.InboxBytes)), s.SendRate, s.SendP99Ms, s.CatchupPerS)
	}
	fmt.Fprintln(&wv, "# back_min\tdevice_p50_entries_per_s\twave_entries_per_s\tentries\tdrain_s\tdevices\tload1")
	for _, w := range waves {
		if w.Incomplete == 0 && w.Entries > w.Expired {
			fmt.Fprintf(&wv, "%.3f\t%.3f\t%.3f\t%d\t%.3f\t%d\t%.2f\n", w.BackS/60, w.DevicePerS, w.PerS, w.Entries, w.DrainS, w.Devices, w.Load1)
		}
	}
	for name, body := range map[string]string{"soak-samples.jsonl": jl.String(), "soak.tsv": tsv.String(), "soak-waves.tsv": wv.String()} {
		if err := os.WriteFile(filepath.Join(o.plotDir, name), []byte(body), 0o644); err != nil {
			logf(true, "plot data: %v", err)
		}
	}
}

// ---------------------------------------------------------------- worker

// soak_start, soak_sample, soak_stop: the soak's devices.
type soakConv struct {
	ID      int64   `json:"id"`
	Sender  int64   `json:"sender"`
	Members []int64 `json:"members"`
}

type soakArgs struct {
	target
	Convs       []soakConv `json:"convs"`
	Online      []int64    `json:"online"`  // devices online throughout (the senders among them)
	Cohorts     [][]int64  `json:"cohorts"` // devices that leave and come back in turn
	Rate        float64    `json:"rate"`
	WaveEveryMs int64      `json:"wave_every_ms"`
	OfflineMs   int64      `json:"offline_ms"`
	RetentionMs int64      `json:"retention_ms"` // the server's --retention (0: forever)
}

// soakWave is one cohort's return.
type soakWave struct {
	BackNs     int64 `json:"back_ns"`
	Devices    int   `json:"devices"`
	Entries    int64 `json:"entries"`
	Expired    int64 `json:"expired"`
	LastNs     int64 `json:"last_ns"` // the last backlog message handed over
	Incomplete int   `json:"incomplete"`
	// The median device's catch-up: its backlog entries handed over / the
	// time from the wave's return to its last one.
	DeviceP50PerS float64 `json:"device_p50_per_s"`
	Load1         float64 `json:"load1"` // the machine's load when the wave came back
	left          int
	devPerS       []float64
}

// soakInterval is what happened since the previous soak_sample.
type soakInterval struct {
	Stored    int64       `json:"stored"`
	NotStored int64       `json:"not_stored"`
	SendHist  string      `json:"send_hist"` // due → STORED
	Received  int64       `json:"received"`
	Waves     []*soakWave `json:"waves"` // finished in the interval
	Offline   int         `json:"offline"`
}

type soakFinal struct {
	Stored     int64 `json:"stored"`
	Entries    int64 `json:"entries"`
	Lost       int64 `json:"lost"`
	Expired    int64 `json:"expired"`
	Dup        int64 `json:"dup"`
	NotStored  int64 `json:"not_stored"`
	Unexpected int64 `json:"unexpected"`
	OutOfOrder int64 `json:"out_of_order"`
	Late       int64 `json:"late"`
}

type soakMsg struct {
	id, conv, convSeq, storedNs int64
}

type soakUser struct {
	uid   int64
	convs []int64
	c     *client.Client // nil while away
	recv  map[int64]struct{}
	hwm   map[int64]int64 // per conversation: the highest conv_seq handed over in order
	// While it catches up: the messages stored before it came back that it
	// has not got yet, and its wave.
	backlog map[int64]soakMsg
	wave    *soakWave
	got     int   // backlog entries handed over
	lastNs  int64 // when the last of them was
	// Its sessions: the closed ones and when the current one began (0:
	// away).
	sessions [][2]int64
	onSince  int64
}

type soakRun struct {
	a       soakArgs
	stop    chan struct{}
	loops   sync.WaitGroup // the schedule and the waves
	sends   sync.WaitGroup // sends waiting for their answer
	dials   sync.WaitGroup
	mu      sync.Mutex
	users   map[int64]*soakUser
	ledger  map[int64][]soakMsg // conv → its stored messages
	iv      soakInterval
	hist    *hdrhistogram.Histogram
	fin     soakFinal
	members map[int64]int // conv → members
}

func (w *worker) soakStart(a soakArgs) (none, error) {
	if len(a.Convs) == 0 || a.Rate <= 0 {
		return none{}, errors.New("soak: no conversations or rate")
	}
	s := &soakRun{a: a, stop: make(chan struct{}), users: map[int64]*soakUser{}, ledger: map[int64][]soakMsg{}, members: map[int64]int{}}
	s.resetInterval()
	user := func(uid int64) *soakUser {
		u := s.users[uid]
		if u == nil {
			u = &soakUser{uid: uid, recv: map[int64]struct{}{}, hwm: map[int64]int64{}}
			s.users[uid] = u
		}
		return u
	}
	for _, c := range a.Convs {
		s.members[c.ID] = len(c.Members)
		for _, m := range c.Members {
			u := user(m)
			u.convs = append(u.convs, c.ID)
		}
	}
	all := append([]int64(nil), a.Online...)
	for _, c := range a.Cohorts {
		all = append(all, c...)
	}
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i, uid := range all {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = s.connect(w, s.users[uid])
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.closeAll()
		return none{}, err
	}
	w.mu.Lock()
	w.soak = s
	w.mu.Unlock()
	s.loops.Add(3)
	go s.schedule(w)
	go s.waves(w)
	go s.watchExpiry()
	return none{}, nil
}

// connect dials u's device: a client that confirms what its handler took,
// answers Delivered from what the device has (so a message it got before
// it left is not handed over twice) and LastConvSeq from its order.
func (s *soakRun) connect(w *worker, u *soakUser) error {
	o, err := w.options(s.a.target, u.uid, "soak")
	if err != nil {
		return err
	}
	o.Handler = func(m client.Message) error { s.handle(u, m); return nil }
	o.Delivered = func(id int64) bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, ok := u.recv[id]
		return ok
	}
	o.LastConvSeq = func(conv int64) int64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return u.hwm[conv]
	}
	c, _, err := dialRetry(context.Background(), o, 100)
	if err != nil {
		return fmt.Errorf("soak: device of uid %d: %w", u.uid, err)
	}
	s.mu.Lock()
	u.c, u.onSince = c, time.Now().UnixNano()
	s.mu.Unlock()
	return nil
}

func (s *soakRun) handle(u *soakUser, m client.Message) {
	now := time.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := u.recv[m.MsgID]; dup {
		s.fin.Dup++
		return
	}
	if !u.member(m.ConvID) {
		s.fin.Unexpected++
		return
	}
	u.recv[m.MsgID] = struct{}{}
	s.iv.Received++
	if m.Late {
		s.fin.Late++
	} else if m.Lane != "newest" {
		if m.ConvSeq <= u.hwm[m.ConvID] {
			s.fin.OutOfOrder++
		}
		u.hwm[m.ConvID] = max(u.hwm[m.ConvID], m.ConvSeq)
	}
	if _, ok := u.backlog[m.MsgID]; ok {
		delete(u.backlog, m.MsgID)
		u.got++
		u.lastNs = now
		u.wave.LastNs = max(u.wave.LastNs, now)
		if len(u.backlog) == 0 {
			s.deviceDoneLocked(u, false)
		}
	}
}

func (u *soakUser) member(conv int64) bool {
	for _, c := range u.convs {
		if c == conv {
			return true
		}
	}
	return false
}

// deviceDoneLocked ends u's catch-up (incomplete: it left before it had
// everything); the last device of a wave finishes the wave.
func (s *soakRun) deviceDoneLocked(u *soakUser, incomplete bool) {
	w := u.wave
	if w == nil {
		return
	}
	if incomplete {
		w.Incomplete++
	} else if u.got > 0 && u.lastNs > w.BackNs {
		w.devPerS = append(w.devPerS, float64(u.got)/(float64(u.lastNs-w.BackNs)/1e9))
	}
	u.backlog, u.wave, u.got, u.lastNs = nil, nil, 0, 0
	w.left--
	if w.left == 0 {
		if len(w.devPerS) > 0 {
			w.DeviceP50PerS = median(w.devPerS)
		}
		s.iv.Waves = append(s.iv.Waves, w)
	}
}

// watchExpiry takes what retention expired out of the backlogs of the
// devices catching up, as their clients learn the horizons (an expired
// message never comes: the client passes over it).
func (s *soakRun) watchExpiry() {
	defer s.loops.Done()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.expireBacklogs()
	}
}

func (s *soakRun) expireBacklogs() {
	// The horizons are read outside s.mu (see missing).
	s.mu.Lock()
	catching := map[*soakUser]*client.Client{}
	for _, u := range s.users {
		if u.backlog != nil && u.c != nil {
			catching[u] = u.c
		}
	}
	s.mu.Unlock()
	if len(catching) == 0 {
		return
	}
	horizons := make(map[*soakUser]map[int64]int64, len(catching))
	for u, c := range catching {
		horizons[u] = expiredUpTo(c)
	}
	now := time.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	for u, h := range horizons {
		if len(h) == 0 || u.backlog == nil {
			continue
		}
		for id, m := range u.backlog {
			if m.convSeq <= h[m.conv] {
				delete(u.backlog, id)
				u.wave.Expired++
			}
		}
		if len(u.backlog) == 0 {
			u.wave.LastNs = max(u.wave.LastNs, now)
			s.deviceDoneLocked(u, false)
		}
	}
}

// schedule sends until stop on an open-loop schedule: message i is due at
// start + i/rate, to conversation i mod N from its sender; its latency
// counts from the due time (no coordinated omission).
func (s *soakRun) schedule(w *worker) {
	defer s.loops.Done()
	interval := time.Duration(float64(time.Second) / s.a.Rate)
	text := strings.Repeat("soak message body, a typical length. ", 3)
	start := time.Now()
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		select {
		case <-s.stop:
			return
		case <-time.After(time.Until(due)):
		}
		conv := s.a.Convs[i%len(s.a.Convs)]
		s.mu.Lock()
		c := s.users[conv.Sender].c
		s.mu.Unlock()
		p := c.SendAsync(conv.ID, "soak-"+strconv.Itoa(i), text)
		s.sends.Add(1)
		go func() {
			defer s.sends.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r, err := p.Wait(ctx)
			now := time.Now()
			s.mu.Lock()
			defer s.mu.Unlock()
			if err != nil {
				s.iv.NotStored++
				s.fin.NotStored++
				return
			}
			s.ledger[conv.ID] = append(s.ledger[conv.ID], soakMsg{id: r.MsgID, conv: conv.ID, convSeq: r.ConvSeq, storedNs: now.UnixNano()})
			s.iv.Stored++
			s.fin.Stored++
			s.fin.Entries += int64(len(conv.Members))
			record(s.hist, now.Sub(due))
		}()
	}
}

// waves: every WaveEvery, the cohort that left Offline ago comes back and
// the next one leaves.
func (s *soakRun) waves(w *worker) {
	defer s.loops.Done()
	every := time.Duration(s.a.WaveEveryMs) * time.Millisecond
	n := len(s.a.Cohorts)
	// A cohort is back before its next turn to leave.
	away := int(min(max(s.a.OfflineMs/max(s.a.WaveEveryMs, 1), 1), int64(n-1)))
	start := time.Now()
	for k := 0; ; k++ {
		select {
		case <-s.stop:
			return
		case <-time.After(time.Until(start.Add(time.Duration(k) * every))):
		}
		if k >= away {
			s.comeBack(w, s.a.Cohorts[(k-away)%n])
		}
		s.leave(s.a.Cohorts[k%n])
	}
}

// leave takes a cohort's devices offline (each confirms what it handled,
// then closes).
func (s *soakRun) leave(uids []int64) {
	var cs []*client.Client
	s.mu.Lock()
	for _, uid := range uids {
		u := s.users[uid]
		if u.c == nil {
			continue
		}
		cs = append(cs, u.c)
		u.c = nil
		u.sessions = append(u.sessions, [2]int64{u.onSince, time.Now().UnixNano()})
		u.onSince = 0
		if u.backlog != nil {
			s.deviceDoneLocked(u, true)
		}
	}
	s.mu.Unlock()
	closeAll(cs)
}

// comeBack brings a cohort's devices back: each one's backlog is what was
// stored in its conversations before this instant that it has not got.
func (s *soakRun) comeBack(w *worker, uids []int64) {
	wave := &soakWave{BackNs: time.Now().UnixNano(), Load1: load1()}
	var back []*soakUser
	s.mu.Lock()
	for _, uid := range uids {
		u := s.users[uid]
		if u.c != nil {
			continue
		}
		back = append(back, u)
		wave.Devices++
		bl := map[int64]soakMsg{}
		for _, conv := range u.convs {
			for _, m := range s.ledger[conv] {
				if _, ok := u.recv[m.id]; !ok && m.storedNs < wave.BackNs {
					bl[m.id] = m
				}
			}
		}
		if len(bl) > 0 {
			u.backlog, u.wave = bl, wave
			wave.Entries += int64(len(bl))
			wave.left++
		}
	}
	if wave.left == 0 && wave.Devices > 0 {
		s.iv.Waves = append(s.iv.Waves, wave)
	}
	s.mu.Unlock()
	for _, u := range back {
		s.dials.Add(1)
		go func() {
			defer s.dials.Done()
			if err := s.connect(w, u); err != nil {
				logf(true, "%v", err)
			}
		}()
	}
}

func (s *soakRun) resetInterval() {
	s.iv = soakInterval{}
	s.hist = newHist()
}

func (w *worker) soakSample(none) (soakInterval, error) {
	w.mu.Lock()
	s := w.soak
	w.mu.Unlock()
	if s == nil {
		return soakInterval{}, errors.New("no soak run")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	iv := s.iv
	iv.SendHist = encodeHist(s.hist)
	for _, u := range s.users {
		if u.c == nil {
			iv.Offline++
		}
	}
	s.resetInterval()
	return iv, nil
}

// soakStop stops the sends, waits for their answers, brings every device
// back and waits until each has every message stored in its
// conversations, then counts what is missing: expired when retention
// removed it (at or below the conversation's horizon the client learned),
// lost otherwise.
func (w *worker) soakStop(none) (soakFinal, error) {
	w.mu.Lock()
	s := w.soak
	w.soak = nil
	w.mu.Unlock()
	if s == nil {
		return soakFinal{}, errors.New("no soak run")
	}
	close(s.stop)
	s.loops.Wait()
	s.sends.Wait()
	s.dials.Wait()
	var away []int64
	for _, c := range s.a.Cohorts {
		away = append(away, c...)
	}
	s.comeBack(w, away)
	s.dials.Wait()
	defer s.closeAll()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		missing, expired := s.missing()
		if missing == 0 || time.Now().After(deadline) {
			s.mu.Lock()
			defer s.mu.Unlock()
			f := s.fin
			f.Lost, f.Expired = missing, expired
			return f, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// missing counts the (device, message) pairs not handed over: lost, and
// apart those retention expired (not lost: by design). A message counts
// as expired only if it is at or below the conversation's retention
// horizon the device's client learned and the device was away for all of
// its retention but the last quarter: a device that was online while the
// body still existed should have it, expired since or not.
func (s *soakRun) missing() (lost, expired int64) {
	// The horizons are read from the clients outside s.mu: a client may
	// hold its own lock while it asks Delivered or LastConvSeq, which take
	// s.mu.
	s.mu.Lock()
	cs := make(map[int64]*client.Client, len(s.users))
	for uid, u := range s.users {
		cs[uid] = u.c
	}
	s.mu.Unlock()
	horizons := make(map[int64]map[int64]int64, len(cs))
	for uid, c := range cs {
		horizons[uid] = expiredUpTo(c)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for uid, u := range s.users {
		for _, conv := range u.convs {
			for _, m := range s.ledger[conv] {
				if _, ok := u.recv[m.id]; ok {
					continue
				}
				if m.convSeq <= horizons[uid][conv] && s.awayWhileKept(u, m) {
					expired++
				} else {
					lost++
				}
			}
		}
	}
	return lost, expired
}

// awayWhileKept says whether u was away from m's store until the last
// quarter of its retention (the quarter: a session that began just
// before the body went may not have read it in time).
func (s *soakRun) awayWhileKept(u *soakUser, m soakMsg) bool {
	if s.a.RetentionMs <= 0 {
		return false
	}
	until := m.storedNs + s.a.RetentionMs*int64(time.Millisecond)*3/4
	sessions := u.sessions
	if u.onSince > 0 {
		sessions = append(sessions[:len(sessions):len(sessions)], [2]int64{u.onSince, math.MaxInt64})
	}
	for _, ss := range sessions {
		if ss[0] < until && ss[1] > m.storedNs {
			return false
		}
	}
	return true
}

// expiredUpTo is, per conversation, the conv_seq up to which the server's
// retention removed the messages, as the client learned it.
func expiredUpTo(c *client.Client) map[int64]int64 {
	if c == nil {
		return nil
	}
	out := map[int64]int64{}
	for id, cv := range c.Conversations() {
		if cv.ExpiredUpTo > 0 {
			out[id] = cv.ExpiredUpTo
		}
	}
	return out
}

func (s *soakRun) closeAll() {
	s.mu.Lock()
	var cs []*client.Client
	for _, u := range s.users {
		if u.c != nil {
			cs = append(cs, u.c)
			u.c = nil
		}
	}
	s.mu.Unlock()
	closeAll(cs)
}
