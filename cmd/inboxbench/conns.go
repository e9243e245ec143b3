package main

// The conns scenario: the driver (runConns), register (device registration
// for storm, conns and scale) and its worker operations, hold and release.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/inboxd/inboxd/client"
)

// ---------------------------------------------------------------- driver

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
	// DialRetries counts the dials made again, most after a hello the
	// gateway's login budget refused with retry_after_ms.
	DialRetries int64 `json:"dial_retries"`
}

// runConns: N idle connections (distinct users, TCP) held by one gateway
// process. By default the devices are returning ones (each logged in once
// before the measurement, as after a gateway restart); --fresh-devices
// measures first logins, which also create each device's cursor consumer.
// RSS and Go heap are read before and after (each after a forced GC, the
// connections settled) and divided by N. It runs --split unless --split is
// given explicitly: all-in-one, the gateway's process also holds the NATS
// server and its per-device consumers.
func runConns(ctx context.Context, o *opts) (any, error) {
	n := orDefault(o.n, pick(o.quick, 200, 19_000))
	if !o.splitSet && o.sys.url == "" {
		o.sys.split = true
	}
	nw := orDefault(o.workers, pick(o.quick, 2, workersFor(n)))
	sys, p, stop, err := startWith(ctx, o, nw)
	if err != nil {
		return nil, err
	}
	defer stop()
	ranges := split(n, nw)
	hold := func(i int) holdArgs {
		return holdArgs{target: sys.target("desktop"), From: int64(ranges[i][0] + 1), To: int64(ranges[i][1] + 1),
			Device: "idle", Concurrency: o.dialConc, Attempts: 1}
	}
	if !o.freshDevices {
		// Returning devices (a gateway restart's reconnect wave): each
		// device logged in once before, so its cursor consumer exists.
		logf(o.sys.verbose, "conns: registering %d devices", n)
		if err := p.each(func(i int, w *workerProc) error { return register(w, hold(i)) }); err != nil {
			return nil, err
		}
		time.Sleep(pick(o.quick, 200*time.Millisecond, 2*time.Second)) // closes settle
	}
	pid := sys.gwPid()
	measure := func() (rssB int64, heap float64) {
		if sys.gw != nil {
			forceGC(sys.gw.debug)
			heap, _ = metric(sys.gw.ops, "go_memstats_heap_inuse_bytes")
		}
		if pid != 0 {
			rssB, _ = rss(pid)
		}
		return
	}
	rss0, heap0 := measure()
	results := make([]holdResult, nw)
	defer profileWave(o.profile, sys, 4*time.Second)()
	logf(o.sys.verbose, "conns: %d connections from %d workers", n, nw)
	if err := p.each(func(i int, w *workerProc) error { return w.call("hold", hold(i), &results[i]) }); err != nil {
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
		out.DialRetries += r.Retries
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
		saveProfiles(o.profile, sys.gw.debug, "conns")
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

// register logs the devices of a in once each (hello, welcome, close, up
// to 10 attempts), so that each has its cursor consumer: the storm, conns
// and scale scenarios measure returning devices.
func register(w *workerProc, a holdArgs) error {
	a.Attempts, a.CloseAfter = 10, true
	var hr holdResult
	if err := w.call("hold", a, &hr); err != nil {
		return err
	}
	if hr.Failed > 0 {
		return fmt.Errorf("registration: %d devices failed: %s", hr.Failed, hr.FirstErr)
	}
	return nil
}

// ---------------------------------------------------------------- worker

// hold: idle connections (conns), or device registration (close_after).
type holdArgs struct {
	target
	From        int64  `json:"from"`
	To          int64  `json:"to"` // uids [from, to)
	Device      string `json:"device"`
	Concurrency int    `json:"concurrency"`
	Attempts    int    `json:"attempts"`
	CloseAfter  bool   `json:"close_after"` // register: hello, welcome, close
}

type holdResult struct {
	Connected int    `json:"connected"`
	Failed    int    `json:"failed"`
	FirstErr  string `json:"first_err,omitempty"`
	StartNs   int64  `json:"start_ns"`
	EndNs     int64  `json:"end_ns"`
	Handshake string `json:"handshake"` // dial-to-welcome latencies
	Retries   int64  `json:"retries"`   // dials made again (refused by the login budget, or failed)
}

func (w *worker) hold(a holdArgs) (holdResult, error) {
	sem := make(chan struct{}, max(a.Concurrency, 1))
	var (
		mu   sync.Mutex
		res  holdResult
		held []*client.Client
		wg   sync.WaitGroup
	)
	h := newHist()
	res.StartNs = time.Now().UnixNano()
	for uid := a.From; uid < a.To; uid++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(uid int64) {
			defer wg.Done()
			defer func() { <-sem }()
			o, err := w.options(a.target, uid, a.Device)
			var c *client.Client
			start := time.Now()
			var retries int
			if err == nil {
				c, retries, err = dialRetry(context.Background(), o, a.Attempts)
			}
			d := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			res.Retries += int64(retries)
			if err != nil {
				res.Failed++
				if res.FirstErr == "" {
					res.FirstErr = err.Error()
				}
				return
			}
			record(h, d)
			res.Connected++
			if a.CloseAfter {
				go c.Close()
			} else {
				held = append(held, c)
			}
		}(uid)
	}
	wg.Wait()
	res.EndNs = time.Now().UnixNano()
	res.Handshake = encodeHist(h)
	w.mu.Lock()
	w.held = append(w.held, held...)
	w.mu.Unlock()
	return res, nil
}

type releaseResult struct {
	Closed int `json:"closed"`
}

// release closes the connections hold keeps.
func (w *worker) release(none) (releaseResult, error) {
	return releaseResult{Closed: w.closeHeld()}, nil
}

func (w *worker) closeHeld() int {
	w.mu.Lock()
	held := w.held
	w.held = nil
	w.mu.Unlock()
	closeAll(held)
	return len(held)
}
