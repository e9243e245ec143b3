package main

// The live scenario: the driver (runLive, which runs a storm from
// storm.go) and its worker operations, live_start and live_stop.

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/inboxd/inboxd/client"
)

// ---------------------------------------------------------------- driver

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
	// StormDialRetries: the storm devices' dials made again, most after a
	// hello the login budget refused with retry_after_ms.
	StormDialRetries int64 `json:"storm_dial_retries"`
	// ServerCPUUsPerMsg is the CPU of every server process (the system's
	// and Postgres', from /proc) over the idle window, per live message
	// received in it.
	ServerCPUUsPerMsg   float64 `json:"server_cpu_us_per_msg"`
	InboxdCPUUsPerMsg   float64 `json:"inboxd_cpu_us_per_msg"`
	PostgresCPUUsPerMsg float64 `json:"postgres_cpu_us_per_msg"`
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
	sys, st, stop, err := startStorm(ctx, o, users, backlog)
	if err != nil {
		return nil, err
	}
	defer stop()
	flushPreparation(o)
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
	cpu0 := readServerCPU(sys)
	logf(o.sys.verbose, "live: idle window %s at %.0f msgs/s", idle, r)
	// With --profile: the counters at the start of the idle window and
	// before the storm (differences give each phase's own), and CPU
	// profiles of the idle window into DIR/idle: what the live traffic
	// alone costs.
	saveMetrics(o.profile, sys, "live-idle-start")
	idleDir := "" // without --profile, no profile: not one written into ./idle
	if o.profile != "" {
		idleDir = filepath.Join(o.profile, "idle")
	}
	idleProfiled := profileWave(idleDir, sys, max(idle-time.Second, time.Second))
	select {
	case <-time.After(idle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// The idle window ends here, not at the storm's t0: the storm request
	// (every device and every group's msg_ids, decoded by the workers) and
	// the workers' preparation run in the half second before t0, and a
	// message due then is neither idle nor storm (only in "all"). Cut at t0,
	// that half second was 5 % of a 10 s idle window, and its burst of the
	// workers' CPU set the window's p99 (docs/benchmarks.md, Method,
	// "live").
	idleTo := time.Now().UnixNano()
	cpu1 := readServerCPU(sys)
	idleProfiled()
	logf(o.sys.verbose, "live: storm of %d devices × %d messages", users, backlog)
	saveMetrics(o.profile, sys, "live-before-storm")
	defer saveMetrics(o.profile, sys, "live")
	defer profileWave(o.profile, sys, pick(o.quick, time.Second, 5*time.Second))()
	agg, t0, err := st.run(o, sys)
	if err != nil {
		return nil, err
	}
	stormTo := max(agg.res.LastNs, t0+1)
	var lr liveStopResult
	if err := lp[0].call("live_stop", liveStopArgs{Windows: []liveWindow{
		{Name: "idle", From: idleFrom, To: idleTo}, {Name: "storm", From: t0, To: stormTo}, {Name: "all", From: idleFrom, To: stormTo},
	}}, &lr); err != nil {
		return nil, err
	}
	out := liveOut{Scenario: "live", Rate: r, Pairs: pairs, StormUsers: users, Backlog: backlog, StormLost: agg.res.Lost,
		Dup: lr.Dup, Mode: modeName(o), Quick: o.quick, StormDialRetries: agg.res.DialRetries}
	out.StormDrainS = round3(float64(stormTo-t0) / 1e9)
	idleW, stormW := lr.Windows["idle"], lr.Windows["storm"]
	hi, hs := mergeHists(idleW.Hist), mergeHists(stormW.Hist)
	writeCDF(o, "live-idle.tsv", hi)
	writeCDF(o, "live-storm.tsv", hs)
	out.IdleP50Ms, out.IdleP99Ms, out.IdleMaxMs, out.IdleMsgs = ms(hi, 50), ms(hi, 99), maxMs(hi), idleW.Received
	out.ServerCPUUsPerMsg, out.InboxdCPUUsPerMsg, out.PostgresCPUUsPerMsg = perUnit(cpu0, cpu1, idleW.Received)
	out.StormP50Ms, out.StormP99Ms, out.StormMaxMs, out.StormMsgs = ms(hs, 50), ms(hs, 99), maxMs(hs), stormW.Received
	out.Lost = lr.Windows["all"].Lost
	out.NotStored = lr.Windows["all"].Scheduled - lr.Windows["all"].Stored
	return out, nil
}

// ---------------------------------------------------------------- worker

// live_start, live_stop: send-to-receive latency at a fixed rate.
type livePair struct {
	S    int64 `json:"s"`
	R    int64 `json:"r"`
	Conv int64 `json:"conv"`
}

type liveArgs struct {
	target
	Pairs []livePair `json:"pairs"`
	Rate  float64    `json:"rate"`
}

// liveWindow selects the messages scheduled in [From, To) (unix ns).
type liveWindow struct {
	Name string `json:"name"`
	From int64  `json:"from"`
	To   int64  `json:"to"`
}

type liveStopArgs struct {
	Windows []liveWindow `json:"windows"`
}

type livePhase struct {
	Scheduled int64  `json:"scheduled"`
	Stored    int64  `json:"stored"` // the sender got STORED
	Received  int64  `json:"received"`
	Lost      int64  `json:"lost"` // STORED, never handed to the receiver
	Hist      string `json:"hist"`
}

type liveStopResult struct {
	Windows map[string]livePhase `json:"windows"`
	Dup     int64                `json:"dup"`
}

// liveRun records, per scheduled message i, its due time and its latency
// (due → handed to the receiver's handler); windows are cut afterwards.
type liveRun struct {
	stop    chan struct{}
	stopped chan struct{}
	mu      sync.Mutex
	due     []int64
	pending []*client.PendingSend
	lat     map[int]int64
	dup     int64
	senders []*client.Client
	recvs   []*client.Client
}

// receive is a receiver's handler: a probe's text is "<i> <due unix ns>".
func (l *liveRun) receive(m client.Message) error {
	now := time.Now().UnixNano()
	is, ds, ok := strings.Cut(m.Text, " ")
	i, err1 := strconv.Atoi(is)
	due, err2 := strconv.ParseInt(ds, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return nil // not a live probe
	}
	l.mu.Lock()
	if _, dup := l.lat[i]; dup {
		l.dup++
	} else {
		l.lat[i] = now - due
	}
	l.mu.Unlock()
	return nil
}

func (w *worker) liveStart(a liveArgs) (none, error) {
	if len(a.Pairs) == 0 || a.Rate <= 0 {
		return none{}, errors.New("live: no pairs or rate")
	}
	l := &liveRun{stop: make(chan struct{}), stopped: make(chan struct{}), lat: map[int]int64{}}
	for _, p := range a.Pairs {
		o, err := w.options(a.target, p.R, "live")
		if err != nil {
			return none{}, err
		}
		o.Handler = l.receive
		c, _, err := dialRetry(context.Background(), o, 20)
		if err != nil {
			return none{}, err
		}
		l.recvs = append(l.recvs, c)
		s, err := w.dial(a.target, p.S, "live", 20)
		if err != nil {
			return none{}, err
		}
		l.senders = append(l.senders, s)
	}
	w.mu.Lock()
	w.live = l
	w.mu.Unlock()
	go l.schedule(a)
	return none{}, nil
}

// schedule sends until stop on an open-loop schedule: message i is due at
// start + i/rate whatever happened to message i-1, and its latency counts
// from that due time (carried in the text), so a stalled sender or server
// shows up as latency instead of as fewer samples (no coordinated omission).
func (l *liveRun) schedule(a liveArgs) {
	defer close(l.stopped)
	interval := time.Duration(float64(time.Second) / a.Rate)
	start := time.Now()
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			select {
			case <-l.stop:
				return
			case <-time.After(d):
			}
		} else {
			select {
			case <-l.stop:
				return
			default:
			}
		}
		k := i % len(a.Pairs)
		p := l.senders[k].SendAsync(a.Pairs[k].Conv, "live-"+strconv.Itoa(i), strconv.Itoa(i)+" "+strconv.FormatInt(due.UnixNano(), 10))
		l.mu.Lock()
		l.due = append(l.due, due.UnixNano())
		l.pending = append(l.pending, p)
		l.mu.Unlock()
	}
}

func (w *worker) liveStop(a liveStopArgs) (liveStopResult, error) {
	w.mu.Lock()
	l := w.live
	w.live = nil
	w.mu.Unlock()
	if l == nil {
		return liveStopResult{}, errors.New("no live run")
	}
	close(l.stop)
	<-l.stopped
	// Every send's answer (a loaded system may answer late; a send that
	// never got STORED was not the system's to deliver), then time for the
	// stored ones to arrive: a stored message that never does is lost.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	stored := make([]bool, len(l.pending))
	for i, p := range l.pending {
		_, err := p.Wait(ctx)
		stored[i] = err == nil
	}
	cancel()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		missing := 0
		for i := range l.due {
			if _, ok := l.lat[i]; !ok && stored[i] {
				missing++
			}
		}
		l.mu.Unlock()
		if missing == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	closeAll(l.senders)
	closeAll(l.recvs)
	l.mu.Lock()
	defer l.mu.Unlock()
	res := liveStopResult{Windows: map[string]livePhase{}, Dup: l.dup}
	for _, win := range a.Windows {
		var ph livePhase
		h := newHist()
		for i, due := range l.due {
			if due < win.From || due >= win.To {
				continue
			}
			ph.Scheduled++
			if stored[i] {
				ph.Stored++
			}
			if d, ok := l.lat[i]; ok {
				ph.Received++
				record(h, time.Duration(d))
			} else if stored[i] {
				ph.Lost++
			}
		}
		ph.Hist = encodeHist(h)
		res.Windows[win.Name] = ph
	}
	return res, nil
}

// flushPreparation writes the preparation's dirty pages to disk (sync(2))
// before the idle window, which is defined as nothing else running. The
// 10,000 × 200 preparation leaves 200-400 MB of page cache dirty (the
// JetStream store, Postgres); the kernel wrote the oldest of it back about
// 30 s later, inside the idle window, and the live messages' Postgres
// commits waited behind that writeback for their WAL flush (in one run 7
// of 2,001 commits took 64-128 ms). Six runs alternated: idle p99 17-103
// ms, median 35 ms, without the flush; 9-30 ms, median 21 ms, with it
// (docs/benchmarks.md, Method, "live"). A storm at
// 9 a.m. follows a night whose writes the kernel has long written back.
func flushPreparation(o *opts) {
	t := time.Now()
	syscall.Sync()
	logf(o.sys.verbose, "live: the preparation's writes flushed to disk in %s", time.Since(t).Round(time.Millisecond))
}
