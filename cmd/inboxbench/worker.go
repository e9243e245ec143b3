package main

// The load generator. The parent re-executes itself as `inboxbench worker`
// processes: each holds at most ~9,000 client connections (one fd each; the
// machine allows 20,000 per process) dialled from its own 127.0.0.x source
// address, so that neither the fd limit nor the ephemeral ports of one
// source address (28k) bound a scenario. The parent sends one JSON request
// per line on the worker's stdin and reads one JSON answer per line from
// its stdout (request ids match them up, so long operations such as a live
// run can be steered while they run). Latencies travel as encoded HDR
// histograms, counts as numbers. A worker exits when its stdin closes.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/streams"
)

type wreq struct {
	ID   uint64          `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args"`
}

type wresp struct {
	ID   uint64          `json:"id"`
	Err  string          `json:"err,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// target says where and how clients connect.
type target struct {
	URL    string `json:"url"`
	Secret string `json:"secret"`
	Kind   string `json:"kind,omitempty"`
}

type worker struct {
	local *net.TCPAddr
	outMu sync.Mutex
	out   *bufio.Writer

	mu   sync.Mutex
	held []*client.Client
	live *liveRun
}

func workerMain(args []string) {
	fs := flag.NewFlagSet("worker", flag.ExitOnError)
	local := fs.String("local", "", "source address of the worker's connections (127.0.0.x)")
	_ = fs.Parse(args)
	w := &worker{out: bufio.NewWriter(os.Stdout)}
	// INBOXBENCH_WORKER_PROFILE=dir: a CPU profile of each worker, to see
	// what the load generator itself costs.
	if dir := os.Getenv("INBOXBENCH_WORKER_PROFILE"); dir != "" {
		if f, err := os.Create(filepath.Join(dir, fmt.Sprintf("worker-%d.cpu.pb.gz", os.Getpid()))); err == nil {
			_ = pprof.StartCPUProfile(f)
			defer f.Close()
		}
	}
	if *local != "" {
		w.local = &net.TCPAddr{IP: net.ParseIP(*local)}
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	var wg sync.WaitGroup
	for sc.Scan() {
		var r wreq
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			fmt.Fprintln(os.Stderr, "worker: bad request:", err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			data, err := w.do(r)
			resp := wresp{ID: r.ID}
			if err != nil {
				resp.Err = err.Error()
			} else if data != nil {
				resp.Data, _ = json.Marshal(data)
			}
			b, _ := json.Marshal(resp)
			w.outMu.Lock()
			_, _ = w.out.Write(append(b, '\n'))
			_ = w.out.Flush()
			w.outMu.Unlock()
		}()
	}
	// stdin closed: the parent is done (or gone).
	w.release()
	pprof.StopCPUProfile()
	os.Exit(0)
}

func decodeArgs[T any](raw json.RawMessage) (T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}

func (w *worker) do(r wreq) (any, error) {
	switch r.Op {
	case "hold":
		a, err := decodeArgs[holdArgs](r.Args)
		if err != nil {
			return nil, err
		}
		return w.hold(a), nil
	case "release":
		return map[string]int{"closed": w.release()}, nil
	case "storm":
		a, err := decodeArgs[stormArgs](r.Args)
		if err != nil {
			return nil, err
		}
		return w.storm(a)
	case "send":
		a, err := decodeArgs[sendArgs](r.Args)
		if err != nil {
			return nil, err
		}
		return w.send(a)
	case "seedscale":
		a, err := decodeArgs[seedScaleArgs](r.Args)
		if err != nil {
			return nil, err
		}
		return w.seedScale(a)
	case "drain1":
		a, err := decodeArgs[drain1Args](r.Args)
		if err != nil {
			return nil, err
		}
		return w.drain1(a)
	case "rawpub":
		a, err := decodeArgs[rawPubArgs](r.Args)
		if err != nil {
			return nil, err
		}
		return rawPublish(a)
	case "jsdrain":
		a, err := decodeArgs[jsDrainArgs](r.Args)
		if err != nil {
			return nil, err
		}
		return jsDrain(a)
	case "live_start":
		a, err := decodeArgs[liveArgs](r.Args)
		if err != nil {
			return nil, err
		}
		return nil, w.liveStart(a)
	case "live_stop":
		a, err := decodeArgs[liveStopArgs](r.Args)
		if err != nil {
			return nil, err
		}
		return w.liveStop(a)
	}
	return nil, fmt.Errorf("unknown op %q", r.Op)
}

func (w *worker) options(t target, uid int64, device string) (client.Options, error) {
	tok, err := auth.NewSigner(t.Secret).Issue(uid, device, 24*time.Hour)
	if err != nil {
		return client.Options{}, err
	}
	o := client.Options{URL: t.URL, Token: tok, DeviceKind: t.Kind, DialTimeout: 30 * time.Second,
		MaxBackoff: 2 * time.Second}
	if w.local != nil {
		o.LocalAddr = w.local
	}
	return o, nil
}

// dialRetry dials until it succeeds, attempts are used up or ctx ends.
func dialRetry(ctx context.Context, o client.Options, attempts int) (*client.Client, int, error) {
	var err error
	for i := 0; i < max(attempts, 1); i++ {
		var c *client.Client
		if c, err = client.Dial(ctx, o); err == nil {
			return c, i, nil
		}
		if ctx.Err() != nil {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(50*(i+1)) * time.Millisecond):
		}
	}
	return nil, attempts, err
}

// --- hold: idle connections (conns scenario, device registration) ---

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
}

func (w *worker) hold(a holdArgs) holdResult {
	conc := max(a.Concurrency, 1)
	sem := make(chan struct{}, conc)
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
			if err == nil {
				c, _, err = dialRetry(context.Background(), o, a.Attempts)
			}
			d := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
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
	return res
}

func (w *worker) release() int {
	w.mu.Lock()
	held := w.held
	w.held = nil
	w.mu.Unlock()
	closeAll(held)
	return len(held)
}

func closeAll(cs []*client.Client) {
	sem := make(chan struct{}, 512)
	var wg sync.WaitGroup
	for _, c := range cs {
		if c == nil {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Close()
			<-sem
		}()
	}
	wg.Wait()
}

// --- storm: devices with a backlog connect at once and drain ---

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

// devState is one storm device's tally. The handler runs on the client's
// delivery goroutine only; the counters the parent reads are atomics.
type devState struct {
	index    map[int64]int32 // shared per group, read-only
	bits     []uint64
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
	i, ok := d.index[m.MsgID]
	if !ok {
		d.extra.Add(1)
		return nil
	}
	if d.bits[i/64]&(1<<(i%64)) != 0 {
		d.dup.Add(1) // the client handed the same msg_id over twice
		return nil
	}
	d.bits[i/64] |= 1 << (i % 64)
	d.lastNs.Store(now)
	if d.got.Add(1) == d.want {
		d.finished()
	}
	return nil
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
		d := &devState{index: idx[sd.G], bits: make([]uint64, (want+63)/64), want: int32(want), finished: finished}
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
		res.Devices++
		got := int64(d.got.Load())
		res.Expected += int64(d.want)
		res.Received += got
		res.Lost += int64(d.want) - got
		res.Dup += int64(d.dup.Load())
		res.Unexpected += int64(d.extra.Load())
		if got < int64(d.want) {
			res.Incomplete++
		}
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

// --- send: senders keep a window of sends in flight ---

type sender struct {
	UID   int64 `json:"uid"`
	Conv  int64 `json:"conv"`
	Count int   `json:"count"`
}

type sendArgs struct {
	target
	Senders []sender `json:"senders"`
	Window  int      `json:"window"`
	Text    string   `json:"text"`
	Prefix  string   `json:"prefix"` // client_msg_id prefix (unique per call)
	Collect bool     `json:"collect"`
}

type sendResult struct {
	Msgs    int64              `json:"msgs"`
	StartNs int64              `json:"start_ns"`
	EndNs   int64              `json:"end_ns"`
	IDs     map[string][]int64 `json:"ids,omitempty"` // conv → msg_ids in conv_seq order
}

func (w *worker) send(a sendArgs) (sendResult, error) {
	clients := make([]*client.Client, len(a.Senders))
	defer closeAll(clients)
	for i, s := range a.Senders {
		o, err := w.options(a.target, s.UID, "sender")
		if err != nil {
			return sendResult{}, err
		}
		if clients[i], _, err = dialRetry(context.Background(), o, 20); err != nil {
			return sendResult{}, err
		}
	}
	window := max(a.Window, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	res := sendResult{}
	if a.Collect {
		res.IDs = map[string][]int64{}
	}
	var mu sync.Mutex
	var firstErr error
	var total atomic.Int64
	var wg sync.WaitGroup
	res.StartNs = time.Now().UnixNano()
	for i, s := range a.Senders {
		wg.Add(1)
		go func(c *client.Client, s sender, si int) {
			defer wg.Done()
			var ids []int64
			if a.Collect {
				ids = make([]int64, 0, s.Count)
			}
			inflight := make([]*client.PendingSend, 0, window)
			wait := func(k int) bool {
				for len(inflight) > k {
					r, err := inflight[0].Wait(ctx)
					inflight = inflight[1:]
					if err != nil {
						mu.Lock()
						if firstErr == nil {
							firstErr = err
						}
						mu.Unlock()
						return false
					}
					total.Add(1)
					if a.Collect {
						ids = append(ids, r.MsgID)
					}
				}
				return true
			}
			for j := 0; j < s.Count; j++ {
				if !wait(window - 1) {
					return
				}
				inflight = append(inflight, c.SendAsync(s.Conv, a.Prefix+strconv.Itoa(si)+"-"+strconv.Itoa(j), a.Text))
			}
			wait(0)
			if a.Collect {
				mu.Lock()
				res.IDs[strconv.FormatInt(s.Conv, 10)] = ids
				mu.Unlock()
			}
		}(clients[i], s, i)
	}
	wg.Wait()
	res.EndNs = time.Now().UnixNano()
	res.Msgs = total.Load()
	return res, firstErr
}

// --- seedscale: background group traffic with one device's messages
// spread evenly through it (as BenchmarkCatchUpScale does) ---

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
	ob, err := w.options(a.target, a.BgUID, "bg")
	if err != nil {
		return sendResult{}, err
	}
	od, err := w.options(a.target, a.DirectUID, "direct")
	if err != nil {
		return sendResult{}, err
	}
	bg, _, err := dialRetry(context.Background(), ob, 20)
	if err != nil {
		return sendResult{}, err
	}
	defer bg.Close()
	direct, _, err := dialRetry(context.Background(), od, 20)
	if err != nil {
		return sendResult{}, err
	}
	defer direct.Close()
	ctx := context.Background()
	res := sendResult{StartNs: time.Now().UnixNano()}
	var window []*client.PendingSend
	wait := func(k int) error {
		for len(window) > k {
			if _, err := window[0].Wait(ctx); err != nil {
				return err
			}
			window = window[1:]
			res.Msgs++
		}
		return nil
	}
	for i := 0; i < a.Backlog; i++ {
		for j := 0; j < a.Per; j++ {
			if err := wait(max(a.Window, 1) - 1); err != nil {
				return res, err
			}
			window = append(window, bg.SendAsync(a.Groups[j%len(a.Groups)], "bg-"+strconv.Itoa(i)+"-"+strconv.Itoa(j), "background"))
		}
		if err := wait(0); err != nil {
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

// --- drain1: one device connects and takes its backlog ---

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

// --- rawpub: the fanout baseline, async JetStream publishes of inbox
// entries into copies of the INBOX streams ---

type natsTarget struct {
	NATS string `json:"nats"`
	User string `json:"user"`
	Pass string `json:"pass"`
}

type rawPubArgs struct {
	natsTarget
	Prefix     string `json:"prefix"` // subject prefix of the copied streams
	Partitions int    `json:"partitions"`
	Count      int    `json:"count"`
	Users      int    `json:"users"`
	MaxPending int    `json:"max_pending"`
	Tag        string `json:"tag"` // makes dedupe ids unique per call
}

func rawPublish(a rawPubArgs) (sendResult, error) {
	nc, err := nats.Connect(a.NATS, nats.UserInfo(a.User, a.Pass))
	if err != nil {
		return sendResult{}, err
	}
	defer nc.Close()
	var failed atomic.Int64
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(a.MaxPending),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }))
	if err != nil {
		return sendResult{}, err
	}
	// The entry, headers and dedupe ids the fanout writes, on the copies'
	// subjects instead of the inboxes'.
	e := streams.Entry{MsgID: 1 << 40, ConvID: 1, ConvSeq: 1, SenderUID: 1, Kind: 1, CreatedAtMs: time.Now().UnixMilli()}
	payload, err := e.Marshal()
	if err != nil {
		return sendResult{}, err
	}
	subjects := make([]string, a.Users)
	for i := range subjects {
		uid := int64(i + 1)
		subjects[i] = a.Prefix + "." + strconv.Itoa(ids.Partition(uid, a.Partitions)) + "." + strconv.FormatInt(uid, 10)
	}
	res := sendResult{StartNs: time.Now().UnixNano()}
	for i := 0; i < a.Count; i++ {
		uid := int64(i%a.Users + 1)
		m := e.MsgOn(subjects[uid-1], payload, a.Tag+streams.MessageDedupeID(int64(i), uid))
		if _, err := js.PublishMsgAsync(m); err != nil {
			return res, err
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(5 * time.Minute):
		return res, errors.New("rawpub: acks did not complete in 5 minutes")
	}
	res.EndNs = time.Now().UnixNano()
	res.Msgs = int64(a.Count) - failed.Load()
	if f := failed.Load(); f > 0 {
		return res, fmt.Errorf("rawpub: %d publishes failed", f)
	}
	return res, nil
}

// --- jsdrain: the storm baseline, the same backlogs read straight from
// the INBOX streams, one ordered (ephemeral, flow-controlled) consumer
// filtered to each user's subject ---

type jsDrainArgs struct {
	natsTarget
	Partitions  int           `json:"partitions"`
	Devices     []stormDevice `json:"devices"`
	Groups      [][]int64     `json:"groups"`
	Concurrency int           `json:"concurrency"`
	Conns       int           `json:"conns"`
	TimeoutMs   int64         `json:"timeout_ms"`
}

func jsDrain(a jsDrainArgs) (stormResult, error) {
	idx := groupIndexes(a.Groups)
	var jss []jetstream.JetStream
	for i := 0; i < max(a.Conns, 1); i++ {
		nc, err := nats.Connect(a.NATS, nats.UserInfo(a.User, a.Pass))
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
			got, dup, extra, err := drainUser(ctx, js, a.Partitions, sd.UID, idx[sd.G], len(a.Groups[sd.G]))
			mu.Lock()
			defer mu.Unlock()
			res.Devices++
			res.Expected += int64(len(a.Groups[sd.G]))
			res.Received += int64(got)
			res.Lost += int64(len(a.Groups[sd.G]) - got)
			res.Dup += int64(dup)
			res.Unexpected += int64(extra)
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

func drainUser(ctx context.Context, js jetstream.JetStream, parts int, uid int64, index map[int64]int32, want int) (got, dup, extra int, err error) {
	p := ids.Partition(uid, parts)
	c, err := js.OrderedConsumer(ctx, streams.InboxStream(p), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{streams.InboxSubject(p, uid)},
	})
	if err != nil {
		return 0, 0, 0, err
	}
	seen := make([]uint64, (want+63)/64)
	for got < want {
		batch, err := c.Fetch(want-got, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
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
			i, ok := index[e.MsgID]
			switch {
			case !ok:
				extra++
			case seen[i/64]&(1<<(i%64)) != 0:
				dup++
			default:
				seen[i/64] |= 1 << (i % 64)
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

// --- live: send-to-receive latency at a fixed rate ---

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

func (w *worker) liveStart(a liveArgs) error {
	if len(a.Pairs) == 0 || a.Rate <= 0 {
		return errors.New("live: no pairs or rate")
	}
	l := &liveRun{stop: make(chan struct{}), stopped: make(chan struct{}), lat: map[int]int64{}}
	for _, p := range a.Pairs {
		o, err := w.options(a.target, p.R, "live")
		if err != nil {
			return err
		}
		o.Handler = func(m client.Message) error {
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
		c, _, err := dialRetry(context.Background(), o, 20)
		if err != nil {
			return err
		}
		l.recvs = append(l.recvs, c)
		so, err := w.options(a.target, p.S, "live")
		if err != nil {
			return err
		}
		s, _, err := dialRetry(context.Background(), so, 20)
		if err != nil {
			return err
		}
		l.senders = append(l.senders, s)
	}
	w.mu.Lock()
	w.live = l
	w.mu.Unlock()
	// Open-loop schedule: message i is due at start + i/rate whatever
	// happened to message i-1, and its latency counts from that due time
	// (carried in the text), so a stalled sender or server shows up as
	// latency instead of as fewer samples (no coordinated omission).
	go func() {
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
	}()
	return nil
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
