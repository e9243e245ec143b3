package main

// The scale scenario: the driver (runScale) and its worker operations,
// seedscale and drain1.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/streams"
)

// ---------------------------------------------------------------- driver

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

// scaleOne measures one installation of about total INBOX entries: the
// median drain in ms and the entries it really held.
func scaleOne(ctx context.Context, o *opts, total, backlog, samples int) (float64, uint64, error) {
	sys, p, stop, err := startWith(ctx, o, 1)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
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
		if err := register(p[0], holdArgs{target: sys.target("desktop"), From: 2, To: 3, Device: "s" + strconv.Itoa(i),
			Concurrency: 1}); err != nil {
			return 0, 0, err
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

// totalInboxEntries sums the messages of every INBOX partition.
func (s *system) totalInboxEntries(ctx context.Context) (uint64, error) {
	var n uint64
	for p := 0; p < s.o.partitions; p++ {
		st, err := s.js.Stream(ctx, streams.InboxStream(p))
		if err != nil {
			return 0, err
		}
		ci, err := st.Info(ctx)
		if err != nil {
			return 0, err
		}
		n += ci.State.Msgs
	}
	return n, nil
}

// ---------------------------------------------------------------- worker

// seedscale: background group traffic with one device's messages spread
// evenly through it (as BenchmarkCatchUpScale does).
type seedScaleArgs struct {
	target
	BgUID      int64   `json:"bg_uid"`
	Groups     []int64 `json:"groups"`
	DirectUID  int64   `json:"direct_uid"`
	DirectConv int64   `json:"direct_conv"`
	Backlog    int     `json:"backlog"`
	Per        int     `json:"per"` // background messages before each direct one
	Window     int     `json:"window"`
}

func (w *worker) seedScale(a seedScaleArgs) (sendResult, error) {
	bg, err := w.dial(a.target, a.BgUID, "bg", 20)
	if err != nil {
		return sendResult{}, err
	}
	defer bg.Close()
	direct, err := w.dial(a.target, a.DirectUID, "direct", 20)
	if err != nil {
		return sendResult{}, err
	}
	defer direct.Close()
	ctx := context.Background()
	res := sendResult{StartNs: time.Now().UnixNano()}
	win := sendWindow{size: a.Window, stored: func(client.Result) { res.Msgs++ }}
	for i := 0; i < a.Backlog; i++ {
		for j := 0; j < a.Per; j++ {
			if err := win.send(ctx, bg, a.Groups[j%len(a.Groups)], "bg-"+strconv.Itoa(i)+"-"+strconv.Itoa(j), "background"); err != nil {
				return res, err
			}
		}
		if err := win.wait(ctx, 0); err != nil {
			return res, err
		}
		if _, err := direct.Send(ctx, a.DirectConv, "d-"+strconv.Itoa(i), "for the measured device"); err != nil {
			return res, err
		}
		res.Msgs++
	}
	res.EndNs = time.Now().UnixNano()
	return res, nil
}

// drain1: one device connects and takes its backlog.
type drain1Args struct {
	target
	UID       int64  `json:"uid"`
	Device    string `json:"device"`
	Expect    int    `json:"expect"`
	TimeoutMs int64  `json:"timeout_ms"`
}

type drain1Result struct {
	Ms  float64 `json:"ms"`
	Got int     `json:"got"`
}

func (w *worker) drain1(a drain1Args) (drain1Result, error) {
	o, err := w.options(a.target, a.UID, a.Device)
	if err != nil {
		return drain1Result{}, err
	}
	var got atomic.Int64
	done := make(chan struct{})
	var end atomic.Int64
	o.Handler = func(client.Message) error {
		if got.Add(1) == int64(a.Expect) {
			end.Store(time.Now().UnixNano())
			close(done)
		}
		return nil
	}
	start := time.Now()
	c, err := client.Dial(context.Background(), o)
	if err != nil {
		return drain1Result{}, err
	}
	defer c.Close()
	select {
	case <-done:
	case <-time.After(time.Duration(a.TimeoutMs) * time.Millisecond):
		return drain1Result{Got: int(got.Load())}, fmt.Errorf("drain: %d of %d messages after %dms", got.Load(), a.Expect, a.TimeoutMs)
	}
	return drain1Result{Ms: round3(float64(end.Load()-start.UnixNano()) / 1e6), Got: int(got.Load())}, nil
}
