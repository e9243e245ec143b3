package main

// The devices scenario (devices at enterprise scale): the driver
// (runDevices), its system (NATS-only processes, one or a cluster, and the
// services split) and its worker operations, devices_hold and
// devices_seen.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/streams"
)

// ---------------------------------------------------------------- driver

type devicesOut struct {
	Scenario   string `json:"scenario"`
	Nodes      int    `json:"nodes"`
	Replicas   int    `json:"replicas"`
	Registered int    `json:"registered"`
	Online     int    `json:"online"`
	DeviceReap string `json:"device_reap"` // the gateway's --device-reap ("" : its default)
	// NATS memory: the Go heap in use after a forced GC
	// (go_memstats_heap_inuse_bytes of the NATS-only processes, summed),
	// and their VmRSS summed; per registered device: (steady − base) / N,
	// steady being after the reap with the online devices connected.
	NATSMemory             string  `json:"nats_memory"`
	HeapBytesPerDevice     float64 `json:"heap_bytes_per_registered_device"`
	RSSBytesPerDevice      float64 `json:"rss_bytes_per_registered_device"`
	HeapBytesPerDevicePeak float64 `json:"heap_bytes_per_registered_device_all_consumers"` // right after registration, before any reap
	FilesPerDevice         float64 `json:"store_files_per_registered_device"`
	ConsumersRegistered    int     `json:"consumers_after_registration"`
	ConsumersSteady        int     `json:"consumers_steady"`
	RegisterPerS           float64 `json:"registrations_per_s"`
	OnlineLoginP50Ms       float64 `json:"online_login_p50_ms"`
	OnlineLoginP99Ms       float64 `json:"online_login_p99_ms"`
	RestartNode            string  `json:"restart_node"`
	NATSStopMs             float64 `json:"nats_stop_ms"`
	NATSStartMs            float64 `json:"nats_start_ms"`
	LiveAgainMs            float64 `json:"live_again_ms"` // from the stop to every online device holding a probe sent after it
	LiveAgainDevices       int     `json:"live_again_devices"`
	WeekOfflineLoginMs     float64 `json:"week_offline_login_ms"` // median: login to its last waiting message, consumer reaped
	HeapBytesBase          int64   `json:"heap_bytes_base"`
	HeapBytesRegistered    int64   `json:"heap_bytes_registered"`
	HeapBytesSteady        int64   `json:"heap_bytes_steady"`
	RSSBytesBase           int64   `json:"rss_bytes_base"`
	RSSBytesSteady         int64   `json:"rss_bytes_steady"`
	StoreFilesBase         int     `json:"store_files_base"`
	StoreFilesSteady       int     `json:"store_files_steady"`
	Mode                   string  `json:"mode"`
	Quick                  bool    `json:"quick"`
}

// devicesPerUser: a company's people have a phone, a desktop and a browser.
var deviceNames = []string{"phone", "desk", "web"}

// Users of the scenario: registered devices belong to uids devBase..;
// devSender sends the probes and the waiting messages.
const (
	devBase   = 100_000
	devSender = 99_999
)

// runDevices: N registered devices (3 per user) of which M are online, on
// one NATS server (R1) or an N-node cluster (R3), the services split so
// that the NATS processes' memory is NATS alone. It registers every device
// (a login each: its consumer and its mirror row), waits out the
// gateway's --device-reap when it is short (the default's behaviour,
// compressed; the bench's default is 30s), connects the online devices
// (one per user, the desk), then restarts one NATS node (the SEND leader)
// and times how long until every online device holds a message sent after
// the stop, and last logs in devices offline since their registration
// (their consumers reaped: the mirror path) with 10 messages waiting.
func runDevices(ctx context.Context, o *opts) (any, error) {
	if o.sys.url != "" {
		return nil, errors.New("devices starts its own systems: not available with --url")
	}
	nodes := []int{1, 3}
	if o.nodes != 0 {
		nodes = []int{o.nodes}
	}
	var outs []devicesOut
	for _, n := range nodes {
		out, err := devicesOne(ctx, o, n)
		if err != nil {
			return nil, fmt.Errorf("%d node(s): %w", n, err)
		}
		outs = append(outs, out)
	}
	if len(outs) == 1 {
		return outs[0], nil
	}
	return devicesPair{Scenario: "devices", Single: outs[0], Cluster: outs[1]}, nil
}

// devicesPair is the result of a run on one server and on a cluster.
type devicesPair struct {
	Scenario string     `json:"scenario"`
	Single   devicesOut `json:"single"`
	Cluster  devicesOut `json:"cluster"`
}

func devicesOne(ctx context.Context, o *opts, nodes int) (devicesOut, error) {
	registered := orDefault(o.registered, pick(o.quick, 300, 60_000))
	online := orDefault(o.online, pick(o.quick, 30, 5_000))
	users := (registered + len(deviceNames) - 1) / len(deviceNames)
	registered = users * len(deviceNames)
	if online > users {
		return devicesOut{}, fmt.Errorf("--online %d: more than the %d users (one online device each)", online, users)
	}
	reap := o.deviceReap
	if !o.set["device-reap"] {
		reap = pick(o.quick, 5*time.Second, 30*time.Second)
	}
	replicas := 1
	if nodes >= 3 {
		replicas = 3
	}
	out := devicesOut{Scenario: "devices", Nodes: nodes, Replicas: replicas, Registered: registered, Online: online,
		NATSMemory: "Go heap in use after a forced GC (go_memstats_heap_inuse_bytes) of the NATS-only processes, summed; RSS: their VmRSS",
		Mode:       fmt.Sprintf("split, %d NATS node(s)", nodes), Quick: o.quick}
	if reap > 0 {
		out.DeviceReap = reap.String()
	}
	sys, nats, err := startDevicesSystem(ctx, o.sys, nodes, replicas, reap)
	if err != nil {
		return out, err
	}
	defer sys.stop()
	nw := orDefault(o.workers, pick(o.quick, 1, workersFor(online)+1))
	p, err := startPool(nw, o.sys.verbose)
	if err != nil {
		return out, err
	}
	defer p.stop()

	heap0, rss0 := nats.memory()
	out.HeapBytesBase, out.RSSBytesBase, out.StoreFilesBase = heap0, rss0, nats.files()

	// Register: every device logs in once (its consumer, its mirror row).
	logf(o.sys.verbose, "devices: registering %d devices of %d users", registered, users)
	start := time.Now()
	ranges := split(users, len(p))
	for _, dev := range deviceNames {
		if err := p.each(func(i int, w *workerProc) error {
			return register(w, holdArgs{target: sys.target("desktop"), From: int64(devBase + ranges[i][0]), To: int64(devBase + ranges[i][1]),
				Device: dev, Concurrency: o.dialConc})
		}); err != nil {
			return out, err
		}
	}
	out.RegisterPerS = round3(float64(registered) / time.Since(start).Seconds())
	time.Sleep(2 * time.Second) // the closes settle, the mirror flushes
	out.ConsumersRegistered, _ = sys.deviceConsumers(ctx)
	heap1, _ := nats.memory()
	out.HeapBytesRegistered = heap1
	out.HeapBytesPerDevicePeak = round3(float64(heap1-heap0) / float64(registered))

	// Offline devices' consumers go after --device-reap (the server's
	// inactivity timer; it checks about every few seconds).
	if reap > 0 && reap < 5*time.Minute {
		logf(o.sys.verbose, "devices: waiting out --device-reap %s", reap)
		deadline := time.Now().Add(reap + time.Minute)
		for time.Now().Before(deadline) {
			n, err := sys.deviceConsumers(ctx)
			if err == nil && n == 0 {
				break
			}
			time.Sleep(time.Second)
		}
	}

	// The online devices: the desk of the first `online` users, in one
	// group with the sender.
	members := []int64{devSender}
	for i := range online {
		members = append(members, int64(devBase+i))
	}
	conv, err := sys.createConv(ctx, true, members...)
	if err != nil {
		return out, err
	}
	logf(o.sys.verbose, "devices: %d online devices", online)
	oranges := split(online, len(p))
	hs := make([]devicesHoldResult, len(p))
	if err := p.each(func(i int, w *workerProc) error {
		return w.call("devices_hold", devicesHoldArgs{target: sys.target("desktop"), From: int64(devBase + oranges[i][0]),
			To: int64(devBase + oranges[i][1]), Device: "desk", Concurrency: o.dialConc}, &hs[i])
	}); err != nil {
		return out, err
	}
	var hists []string
	for _, h := range hs {
		if h.Failed > 0 {
			return out, fmt.Errorf("online devices: %d failed: %s", h.Failed, h.FirstErr)
		}
		hists = append(hists, h.Handshake)
	}
	h := mergeHists(hists...)
	out.OnlineLoginP50Ms, out.OnlineLoginP99Ms = ms(h, 50), ms(h, 99)
	time.Sleep(2 * time.Second)
	out.ConsumersSteady, _ = sys.deviceConsumers(ctx)
	heap2, rss2 := nats.memory()
	out.HeapBytesSteady, out.RSSBytesSteady, out.StoreFilesSteady = heap2, rss2, nats.files()
	out.HeapBytesPerDevice = round3(float64(heap2-heap0) / float64(registered))
	out.RSSBytesPerDevice = round3(float64(rss2-rss0) / float64(registered))
	out.FilesPerDevice = round3(float64(out.StoreFilesSteady-out.StoreFilesBase) / float64(registered))

	// Restart one NATS node (the SEND leader) while probes are sent every
	// 200 ms; every online device must hold one sent after the stop.
	sender, err := devicesSender(ctx, sys)
	if err != nil {
		return out, err
	}
	defer sender.Close()
	victim := 0
	if nodes > 1 {
		victim = sys.streamLeader(ctx, nats, streams.SendStream)
	}
	out.RestartNode = nats.names[victim]
	stopAt := time.Now()
	probes, stopProbes := devicesProbe(sender, conv)
	if out.NATSStopMs, out.NATSStartMs, err = nats.restart(ctx, sys, victim); err != nil {
		stopProbes()
		return out, err
	}
	var seen []devicesSeenResult
	deadline := time.Now().Add(pick(o.quick, time.Minute, 5*time.Minute))
	for {
		seen = make([]devicesSeenResult, len(p))
		if err := p.each(func(i int, w *workerProc) error {
			return w.call("devices_seen", devicesSeenArgs{AfterNs: stopAt.UnixNano()}, &seen[i])
		}); err != nil {
			stopProbes()
			return out, err
		}
		n := 0
		for _, s := range seen {
			n += s.Devices
		}
		if n == online || time.Now().After(deadline) {
			out.LiveAgainDevices = n
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	stopProbes()
	var last int64
	for _, s := range seen {
		last = max(last, s.LastNs)
	}
	out.LiveAgainMs = round3(float64(last-stopAt.UnixNano()) / 1e6)
	logf(o.sys.verbose, "devices: %d probes sent; %d of %d online devices live again after %.0f ms", probes(), out.LiveAgainDevices, online, out.LiveAgainMs)
	_ = p.each(func(i int, w *workerProc) error { return w.call("release", nil, nil) })

	// Offline devices (the phones, registered and gone since): each has
	// 10 messages waiting, its consumer reaped; login to the last one.
	const waiting, samples = 10, 5
	var times []float64
	for i := range samples {
		uid := int64(devBase + online + i)
		direct, err := sys.createConv(ctx, false, devSender, uid)
		if err != nil {
			return out, err
		}
		for j := range waiting {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := sender.Send(cctx, direct, "w-"+strconv.Itoa(i)+"-"+strconv.Itoa(j), "waiting")
			cancel()
			if err != nil {
				return out, err
			}
		}
		var dr drain1Result
		if err := p[0].call("drain1", drain1Args{target: sys.target("mobile"), UID: uid, Device: "phone", Expect: waiting,
			TimeoutMs: o.timeout.Milliseconds()}, &dr); err != nil {
			return out, err
		}
		times = append(times, dr.Ms)
	}
	slices.Sort(times)
	out.WeekOfflineLoginMs = times[len(times)/2]
	return out, nil
}

// devicesSender is the probes' and the waiting messages' sender.
func devicesSender(ctx context.Context, sys *system) (*client.Client, error) {
	tok, err := auth.NewSigner(sys.o.secret).Issue(devSender, "sender", 24*time.Hour)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return client.Dial(cctx, client.Options{URL: sys.url, Token: tok, MaxBackoff: 200 * time.Millisecond})
}

// devicesProbe sends a message to conv every 200 ms (each waits at most
// 2 s for its result: sends fail while the only NATS server is down) until
// stop; count is the probes stored.
func devicesProbe(c *client.Client, conv int64) (count func() int64, stop func()) {
	var n atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			// The text carries the send time: a device's first probe sent
			// after the stop is what devices_seen looks for.
			if _, err := c.Send(ctx, conv, "probe-"+strconv.Itoa(i), probePrefix+strconv.FormatInt(time.Now().UnixNano(), 10)); err == nil {
				n.Add(1)
			}
			cancel()
		}
	})
	return n.Load, func() { close(done); wg.Wait() }
}

// ---------------------------------------------------------------- system

// devicesNATS are the NATS-only processes of a devices system.
type devicesNATS struct {
	procs []*proc
	args  [][]string // their spawn arguments, for a restart
	ready []string   // their client addresses
	dirs  []string
	names []string
}

// startDevicesSystem starts n `inboxd --nats-only` nodes (a cluster when
// n > 1: --name, --cluster-listen, --routes), then the syncer (--replicas
// replicas), a fanout and a gateway (--device-reap reap) as separate
// processes connected to every node.
func startDevicesSystem(ctx context.Context, o sysOpts, n, replicas int, reap time.Duration) (_ *system, _ *devicesNATS, err error) {
	s := &system{o: o}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	if s.dir, err = os.MkdirTemp("", "inboxbench-devices-"); err != nil {
		return nil, nil, err
	}
	if err := s.createDB(ctx); err != nil {
		return nil, nil, err
	}
	nn := &devicesNATS{}
	client, route := make([]string, n), make([]string, n)
	for i := range n {
		if client[i], err = freeAddr(); err != nil {
			return nil, nil, err
		}
		if route[i], err = freeAddr(); err != nil {
			return nil, nil, err
		}
	}
	var urls []string
	for i := range n {
		name := "n" + strconv.Itoa(i+1)
		dir := filepath.Join(s.dir, name)
		args := []string{"--nats-only", "--data", dir, "--nats-listen", client[i], "--inbox-partitions", strconv.Itoa(o.partitions), "--log-level", "warn"}
		if n > 1 {
			var routes []string
			for j := range n {
				if j != i {
					routes = append(routes, "nats://"+route[j])
				}
			}
			args = append(args, "--name", name, "--cluster-listen", route[i], "--routes", strings.Join(routes, ","))
		}
		ops, err := freeAddr()
		if err != nil {
			return nil, nil, err
		}
		s.readyAddr = client[i]
		pr, err := s.spawn(ctx, "inboxd", ops, args...)
		if err != nil {
			return nil, nil, err
		}
		nn.procs, nn.args, nn.ready, nn.dirs, nn.names = append(nn.procs, pr), append(nn.args, args), append(nn.ready, client[i]), append(nn.dirs, dir), append(nn.names, name)
		urls = append(urls, "nats://"+client[i])
	}
	s.readyAddr = ""
	s.natsURL = strings.Join(urls, ",")
	addrs := map[string]string{}
	for _, k := range []string{"tcp", "ws", "http-gw", "http-fanout", "http-syncer"} {
		if addrs[k], err = freeAddr(); err != nil {
			return nil, nil, err
		}
	}
	s.url = "tcp://" + addrs["tcp"]
	svc := []string{"--nats", s.natsURL, "--database-url", s.dbURL, "--log-level", "warn",
		"--inbox-partitions", strconv.Itoa(o.partitions), "--send-partitions", "16"}
	// The syncer creates the streams: on a cluster only once JetStream has
	// a meta leader, which it may not have the moment the ports are open.
	var syncErr error
	for range 10 {
		if _, syncErr = s.spawn(ctx, "syncer", addrs["http-syncer"], append(slices.Clone(svc), "--replicas", strconv.Itoa(replicas))...); syncErr == nil {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if syncErr != nil {
		return nil, nil, syncErr
	}
	if _, err := s.spawn(ctx, "fanout", addrs["http-fanout"], append(slices.Clone(svc), "--node-id", "1")...); err != nil {
		return nil, nil, err
	}
	gw := append(slices.Clone(svc), "--tcp", addrs["tcp"], "--ws", addrs["ws"], "--send-rate", "1000000", "--send-entry-rate", "1000000000",
		"--preauth-conns", "16384", "--preauth-conns-per-ip", "16384", "--token-secret", o.secret)
	if reap > 0 {
		gw = append(gw, "--device-reap", reap.String())
	}
	if s.gw, err = s.spawn(ctx, "gateway", addrs["http-gw"], append(gw, o.extra...)...); err != nil {
		return nil, nil, err
	}
	return s, nn, s.connectAdmin(ctx)
}

// memory returns the NATS processes' Go heap in use (after a forced GC)
// and VmRSS, summed.
func (nn *devicesNATS) memory() (heap, rssB int64) {
	for _, p := range nn.procs {
		forceGC(p.debug)
		h, _ := metric(p.ops, "go_memstats_heap_inuse_bytes")
		heap += int64(h)
		r, _ := rss(p.cmd.Process.Pid)
		rssB += r
	}
	return heap, rssB
}

// files counts the files of the NATS nodes' JetStream stores.
func (nn *devicesNATS) files() int {
	n := 0
	for _, d := range nn.dirs {
		_ = filepath.WalkDir(d, func(_ string, e os.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				n++
			}
			return nil
		})
	}
	return n
}

// restart stops node i (SIGTERM: a rolling restart) and starts it again
// on its store and ports; it returns how long each took.
func (nn *devicesNATS) restart(ctx context.Context, s *system, i int) (stopMs, startMs float64, err error) {
	p := nn.procs[i]
	t0 := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Minute):
		return 0, 0, fmt.Errorf("NATS node %s did not stop within 15m", nn.names[i])
	}
	stopMs = round3(float64(time.Since(t0).Microseconds()) / 1000)
	t1 := time.Now()
	s.readyAddr = nn.ready[i]
	np, err := s.spawn(ctx, "inboxd", p.ops, nn.args[i]...)
	s.readyAddr = ""
	if err != nil {
		return stopMs, 0, err
	}
	nn.procs[i] = np
	return stopMs, round3(float64(time.Since(t1).Microseconds()) / 1000), nil
}

// deviceConsumers counts the consumers of every INBOX partition but the
// archivers.
func (s *system) deviceConsumers(ctx context.Context) (int, error) {
	n := 0
	for p := 0; p < s.o.partitions; p++ {
		st, err := s.js.Stream(ctx, streams.InboxStream(p))
		if err != nil {
			return 0, err
		}
		n += max(st.CachedInfo().State.Consumers-1, 0)
	}
	return n, nil
}

// streamLeader returns the index of the node leading stream.
func (s *system) streamLeader(ctx context.Context, nn *devicesNATS, stream string) int {
	st, err := s.js.Stream(ctx, stream)
	if err != nil {
		return 0
	}
	var ci *jetstream.ClusterInfo = st.CachedInfo().Cluster
	if ci != nil {
		if i := slices.Index(nn.names, ci.Leader); i >= 0 {
			return i
		}
	}
	return 0
}

// ---------------------------------------------------------------- worker

// devices_hold: online devices that note when they receive a message.
type devicesHoldArgs struct {
	target
	From        int64  `json:"from"`
	To          int64  `json:"to"` // uids [from, to)
	Device      string `json:"device"`
	Concurrency int    `json:"concurrency"`
}

type devicesHoldResult struct {
	Connected int    `json:"connected"`
	Failed    int    `json:"failed"`
	FirstErr  string `json:"first_err,omitempty"`
	Handshake string `json:"handshake"`
}

// devicesRun is what the held online devices received: per device, the
// send and receipt times of its probes.
type devicesRun struct {
	mu   sync.Mutex
	recv [][]probeRecv
}

type probeRecv struct{ sent, recv int64 } // unix ns

// probePrefix starts a probe's text; its send time (unix ns) follows.
const probePrefix = "probe@"

func (w *worker) devicesHold(a devicesHoldArgs) (devicesHoldResult, error) {
	w.mu.Lock()
	if w.devices == nil {
		w.devices = &devicesRun{}
	}
	run := w.devices
	w.mu.Unlock()
	sem := make(chan struct{}, max(a.Concurrency, 1))
	var (
		mu   sync.Mutex
		res  devicesHoldResult
		held []*client.Client
		wg   sync.WaitGroup
	)
	h := newHist()
	for uid := a.From; uid < a.To; uid++ {
		sem <- struct{}{}
		run.mu.Lock()
		slot := len(run.recv)
		run.recv = append(run.recv, nil)
		run.mu.Unlock()
		wg.Go(func() {
			defer func() { <-sem }()
			o, err := w.options(a.target, uid, a.Device)
			o.Handler = func(m client.Message) error {
				now := time.Now().UnixNano()
				sent, err := strconv.ParseInt(strings.TrimPrefix(m.Text, probePrefix), 10, 64)
				if err != nil || !strings.HasPrefix(m.Text, probePrefix) {
					return nil
				}
				run.mu.Lock()
				run.recv[slot] = append(run.recv[slot], probeRecv{sent, now})
				run.mu.Unlock()
				return nil
			}
			var c *client.Client
			start := time.Now()
			if err == nil {
				c, _, err = dialRetry(context.Background(), o, 10)
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
			held = append(held, c)
		})
	}
	wg.Wait()
	res.Handshake = encodeHist(h)
	w.mu.Lock()
	w.held = append(w.held, held...)
	w.mu.Unlock()
	return res, nil
}

// devices_seen: how many held devices received a probe sent at or after
// AfterNs, and when the last of them received its first such probe.
type devicesSeenArgs struct {
	AfterNs int64 `json:"after_ns"`
}

type devicesSeenResult struct {
	Devices int   `json:"devices"`
	LastNs  int64 `json:"last_ns"`
}

func (w *worker) devicesSeen(a devicesSeenArgs) (devicesSeenResult, error) {
	w.mu.Lock()
	run := w.devices
	w.mu.Unlock()
	var r devicesSeenResult
	if run == nil {
		return r, nil
	}
	run.mu.Lock()
	defer run.mu.Unlock()
	for _, probes := range run.recv {
		first := int64(0)
		for _, pr := range probes {
			if pr.sent >= a.AfterNs && (first == 0 || pr.recv < first) {
				first = pr.recv
			}
		}
		if first != 0 {
			r.Devices++
			r.LastNs = max(r.LastNs, first)
		}
	}
	return r, nil
}
