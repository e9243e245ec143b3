package main

// The fanout scenario: the driver (runFanout, in the parent) and its
// worker operations, send (also the storm's seeding) and rawpub (the
// baseline).

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// ServerCPUUsPerMsg is the CPU of every server process (the system's
	// and Postgres', from /proc) over the send path's run, per message
	// stored: the archiver copying the entries behind it is inside.
	ServerCPUUsPerMsg   float64 `json:"server_cpu_us_per_msg"`
	InboxdCPUUsPerMsg   float64 `json:"inboxd_cpu_us_per_msg"`
	PostgresCPUUsPerMsg float64 `json:"postgres_cpu_us_per_msg"`
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
	sys, p, stop, err := startWith(ctx, o, 1)
	if err != nil {
		return nil, err
	}
	defer stop()
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
	defer profileWave(o.profile, sys, 5*time.Second)()
	var sr sendResult
	cpu0 := readServerCPU(sys)
	if err := p[0].call("send", sendArgs{target: sys.target(""), Senders: senders, Window: o.window, Text: text, Prefix: "m"}, &sr); err != nil {
		return nil, err
	}
	cpu1 := readServerCPU(sys)
	res := fanoutResult{Scenario: "fanout", Group: group, Senders: o.senders, Msgs: sr.Msgs, Entries: sr.Msgs * int64(group),
		Mode: modeName(o), Quick: o.quick}
	res.MsgsPerS = rate(sr.Msgs, sr.StartNs, sr.EndNs)
	res.EntriesPerS = rate(sr.Msgs*int64(group), sr.StartNs, sr.EndNs)
	res.BaselinePublishPerS = rate(raw.Msgs, raw.StartNs, raw.EndNs)
	res.Ratio = ratio(res.EntriesPerS, res.BaselinePublishPerS)
	res.ServerCPUUsPerMsg, res.InboxdCPUUsPerMsg, res.PostgresCPUUsPerMsg = perUnit(cpu0, cpu1, sr.Msgs)
	return res, nil
}

// copyInboxStreams creates BENCHRAW_<p> (subjects benchraw.<p>.*): the
// INBOX_<p> stream definitions with another name and subject, so the raw
// publish baseline writes with the same stream settings (storage, dedupe
// window, limits) without putting entries into real inboxes, where the
// archiver would copy them into Postgres while the send path is measured.
func (s *system) copyInboxStreams(ctx context.Context) (func(), error) {
	layout := streams.Layout{InboxPartitions: s.o.partitions, SendPartitions: 16}
	var names []string
	cleanup := func() {
		for _, n := range names {
			_ = s.js.DeleteStream(context.Background(), n)
		}
	}
	for p := 0; p < s.o.partitions; p++ {
		cfg, err := streams.InboxStreamConfig(layout, p)
		if err != nil {
			cleanup()
			return nil, err
		}
		cfg.Name = "BENCHRAW_" + strconv.Itoa(p)
		cfg.Subjects = []string{"benchraw." + strconv.Itoa(p) + ".*"}
		cfg.Description = "inboxbench: raw publish baseline (copy of INBOX_" + strconv.Itoa(p) + ")"
		if s.o.replicas > 0 {
			cfg.Replicas = s.o.replicas // --cluster: the copies replicated as the inboxes are
		}
		if _, err := s.js.CreateOrUpdateStream(ctx, cfg); err != nil {
			cleanup()
			return nil, fmt.Errorf("create %s: %w", cfg.Name, err)
		}
		names = append(names, cfg.Name)
	}
	return cleanup, nil
}

// ---------------------------------------------------------------- worker

// send: senders keep a window of sends in flight (fanout; the storm's
// seeding with collect).
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
		var err error
		if clients[i], err = w.dial(a.target, s.UID, "sender", 20); err != nil {
			return sendResult{}, err
		}
	}
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
			win := sendWindow{size: a.Window, stored: func(r client.Result) {
				total.Add(1)
				if a.Collect {
					ids = append(ids, r.MsgID)
				}
			}}
			err := win.sendN(ctx, c, s.Conv, s.Count, a.Prefix+strconv.Itoa(si)+"-", a.Text)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && firstErr == nil {
				firstErr = err
			}
			if a.Collect {
				res.IDs[strconv.FormatInt(s.Conv, 10)] = ids
			}
		}(clients[i], s, i)
	}
	wg.Wait()
	res.EndNs = time.Now().UnixNano()
	res.Msgs = total.Load()
	return res, firstErr
}

// sendWindow keeps up to size sends of one client in flight: the next send
// goes out once the oldest is answered, as a client that pipelines.
type sendWindow struct {
	size    int
	pending []*client.PendingSend
	stored  func(client.Result) // each STORED, in send order
}

// send sends text to conv once fewer than size sends are in flight.
func (w *sendWindow) send(ctx context.Context, c *client.Client, conv int64, clientMsgID, text string) error {
	if err := w.wait(ctx, max(w.size, 1)-1); err != nil {
		return err
	}
	w.pending = append(w.pending, c.SendAsync(conv, clientMsgID, text))
	return nil
}

// sendN sends n messages (client_msg_ids prefix0, prefix1, ...) and waits
// for every answer.
func (w *sendWindow) sendN(ctx context.Context, c *client.Client, conv int64, n int, prefix, text string) error {
	for j := 0; j < n; j++ {
		if err := w.send(ctx, c, conv, prefix+strconv.Itoa(j), text); err != nil {
			return err
		}
	}
	return w.wait(ctx, 0)
}

// wait takes answers, oldest first, until at most k sends are in flight.
func (w *sendWindow) wait(ctx context.Context, k int) error {
	for len(w.pending) > k {
		r, err := w.pending[0].Wait(ctx)
		w.pending = w.pending[1:]
		if err != nil {
			return err
		}
		if w.stored != nil {
			w.stored(r)
		}
	}
	return nil
}

// rawpub: the fanout baseline, async JetStream publishes of inbox entries
// into copies of the INBOX streams.
type rawPubArgs struct {
	natsTarget
	Prefix     string `json:"prefix"` // subject prefix of the copied streams
	Partitions int    `json:"partitions"`
	Count      int    `json:"count"`
	Users      int    `json:"users"`
	MaxPending int    `json:"max_pending"`
	Tag        string `json:"tag"` // makes dedupe ids unique per call
}

func (w *worker) rawPublish(a rawPubArgs) (sendResult, error) {
	nc, err := a.connect()
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
		// A stall is backpressure (R3 acks come slower), not a failure:
		// wait for room as long as it takes.
		if _, err := js.PublishMsgAsync(m, jetstream.WithStallWait(time.Minute)); err != nil {
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
