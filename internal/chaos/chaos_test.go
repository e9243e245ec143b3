package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/powercut"
)

// plan sizes a run.
type plan struct {
	users, groups, directs int
	messages               int           // sends in all
	sendEvery              time.Duration // between sends of one sender goroutine
	senders                int
	faultEvery             time.Duration
	minFaults              int // process and network faults at least, each kind of faultKinds once at least
	// offlineThreshold is the gateway's --offline-threshold: low, so that a
	// device sent away by the workload comes back offline too long (newest
	// page first) within the run.
	offlineThreshold int
	// kinds are the fault kinds of the run (default faultKinds); natsDown
	// how long a killed NATS node of a cluster stays down (cluster_test.go).
	kinds        []string
	natsDown     time.Duration
	minNATSKills int // NATS node kills at least (cluster long plan)
	minPowerCuts int // power cuts of the box at least (single-node run)
	fleet        int // probe devices timing a NATS node kill (cluster; default 6)
}

var plans = map[string]plan{
	"short": {users: 16, groups: 3, directs: 8, messages: 3000, sendEvery: 20 * time.Millisecond, senders: 8, faultEvery: 1500 * time.Millisecond, minFaults: 6, offlineThreshold: 150, minPowerCuts: 5},
	"long":  {users: 40, groups: 8, directs: 25, messages: 100000, sendEvery: 12 * time.Millisecond, senders: 16, faultEvery: time.Second, minFaults: 100, offlineThreshold: 1000, minPowerCuts: 50},
}

// pageSize is the backfill page of each device kind (docs/protocol.md), the
// size of a newest page.
var pageSize = map[string]int{"mobile": 100, "desktop": 500}

// faultKinds are the process and network faults the suite injects; every
// run has each of them at least once.
var faultKinds = []string{"kill-gateway", "kill-fanout", "kill-syncer", "restart-nats", "restart-postgres", "half-open", "power-cut"}

func TestChaos(t *testing.T) {
	mode := os.Getenv("INBOXD_CHAOS")
	pl, ok := plans[mode]
	if !ok {
		t.Skip("set INBOXD_CHAOS=short or long (make test / make chaos run it)")
	}
	if v := os.Getenv("INBOXD_CHAOS_MESSAGES"); v != "" {
		pl.messages, _ = strconv.Atoi(v)
	}
	h := startHarness(t, pl)
	w := newWorld(t, h, pl)
	w.run()
	w.report()
}

// ---------------------------------------------------------------- the world

type conv struct {
	id      int64
	members []int64
}

// sent is a send of the workload and what became of it.
type sent struct {
	cmid    string
	sender  int64
	conv    int64
	msgID   int64
	convSeq int64
}

type world struct {
	t       *testing.T
	h       *harness
	pl      plan
	rng     *rand.Rand
	rngMu   sync.Mutex
	convs   []conv
	byUser  map[int64][]int // uid → indexes into convs
	devices []*device
	sentMu  sync.Mutex
	sent    map[string]*sent
	faults  map[string]int
	failed  map[string]error // fault kinds that could not be injected
	recover map[string][]time.Duration
	stuck   int                // devices that needed a fresh connection at the end
	cuts    powercut.CutReport // the power cuts' losses, summed
	kinds   []string
	cluster *clusterWorld // the cluster run's admin connection and probe fleet (nil: single node)
}

func newWorld(t *testing.T, h *harness, pl plan) *world {
	w := &world{t: t, h: h, pl: pl, rng: rand.New(rand.NewPCG(1, 2)), byUser: map[int64][]int{},
		sent: map[string]*sent{}, faults: map[string]int{}, failed: map[string]error{}, recover: map[string][]time.Duration{}, kinds: pl.kinds}
	if w.kinds == nil {
		w.kinds = faultKinds
	}
	nc, err := nats.Connect(h.natsURL(), nats.UserInfo(string(natsauth.Admin), natsauth.Password(natsauth.Admin)))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ac := &admin.Client{NC: nc}
	ctx := context.Background()
	add := func(group bool, members []int64) {
		r, err := ac.CreateConv(ctx, admin.CreateConvRequest{Members: members, Group: group})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range w.convs {
			if c.id == r.ConvID {
				return // a direct conversation of the same pair: there is one per pair
			}
		}
		w.convs = append(w.convs, conv{id: r.ConvID, members: members})
		for _, m := range members {
			w.byUser[m] = append(w.byUser[m], len(w.convs)-1)
		}
	}
	for i := 0; i < pl.directs; i++ {
		a := int64(1 + i%pl.users)
		b := int64(1 + (i*7+3)%pl.users)
		if a == b {
			b = a%int64(pl.users) + 1
		}
		add(false, []int64{a, b})
	}
	for g := 0; g < pl.groups; g++ {
		var members []int64
		for u := 1; u <= pl.users; u++ {
			if (u+g)%3 != 0 {
				members = append(members, int64(u))
			}
		}
		add(true, members)
	}
	// Every user has a phone (the mobile profile: pages of 100, one at a
	// time); every third a desktop too (pages of 500, two).
	for u := 1; u <= pl.users; u++ {
		if len(w.byUser[int64(u)]) == 0 {
			continue
		}
		w.devices = append(w.devices, w.newDevice(int64(u), "phone", "mobile"))
		if u%3 == 0 {
			w.devices = append(w.devices, w.newDevice(int64(u), "desktop", "desktop"))
		}
	}
	return w
}

func (w *world) intn(n int) int {
	w.rngMu.Lock()
	defer w.rngMu.Unlock()
	return w.rng.IntN(n)
}

// newDevice makes a device of uid; on several gateways a user's phone and
// desktop are on different ones (live entries must reach both).
func (w *world) newDevice(uid int64, name, kind string) *device {
	gw := int(uid)
	if kind == "desktop" {
		gw++
	}
	addr := w.h.tcpAddr(gw)
	return &device{uid: uid, name: name, kind: kind, gw: addr, proxy: testenv.StartProxy(w.t, addr),
		stored: map[int64]client.Message{}, order: map[int64][]handed{}}
}

func (w *world) run() {
	t := w.t
	for _, d := range w.devices {
		if err := d.connectWithin(t, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	per := w.pl.messages / w.pl.senders
	start := time.Now()
	for s := 0; s < w.pl.senders; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			w.sender(s, per)
		}(s)
	}
	// Devices come and go, some for long; faults hit the system.
	done, sendersDone := make(chan struct{}), make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(3)
	go func() { defer bg.Done(); w.churn(done) }()
	go func() { defer bg.Done(); w.inject(done) }()
	go func() { defer bg.Done(); w.sendAway(sendersDone) }()
	wg.Wait()
	close(sendersDone)
	// Keep injecting until the plan's fault count is reached, each kind
	// at least once.
	for deadline := time.Now().Add(3 * time.Minute); w.systemFaults() < w.pl.minFaults || len(w.missingFaults()) > 0 || w.natsKills() < w.pl.minNATSKills || w.powerCuts() < w.pl.minPowerCuts; {
		if time.Now().After(deadline) {
			t.Errorf("after 3 minutes more: %d faults of %d, %d NATS node kills of %d, %d power cuts of %d, never %v", w.systemFaults(), w.pl.minFaults,
				w.natsKills(), w.pl.minNATSKills, w.powerCuts(), w.pl.minPowerCuts, w.missingFaults())
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(done)
	bg.Wait()
	t.Logf("workload done in %s; quiescing", time.Since(start).Round(time.Second))

	// Quiescence: everything up, every device connected until it has all.
	w.h.waitHealthy(120 * time.Second)
	for _, d := range w.devices {
		d.proxy.Blackhole(false)
		if err := d.connectWithin(t, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for len(w.incomplete()) > 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	// A device still missing messages has a stuck session (a bug too, but
	// not a loss) if a fresh connection gets them; a skipped cursor would
	// not.
	if inc := w.incomplete(); len(inc) > 0 {
		w.stuck = len(inc)
		t.Errorf("%d devices still incomplete after quiescence: reconnecting them to tell a stuck session from a loss", len(inc))
		for _, d := range inc {
			d.mu.Lock()
			var st client.Stats
			var cursor uint64
			if d.c != nil {
				st, cursor = d.c.Stats(), d.c.Welcome().GetCursor()
			}
			d.mu.Unlock()
			body := ""
			for _, gw := range w.h.debugGWs {
				if resp, err := http.Get("http://" + gw + "/debug/sessions?uid=" + strconv.FormatInt(d.uid, 10)); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					body += gw + ": " + string(b) + " "
				}
			}
			t.Logf("stuck %d/%s: client %+v welcome cursor %d; gateway sessions %s", d.uid, d.name, st, cursor, body)
			if nc, err := nats.Connect(w.h.natsURL(), nats.UserInfo(string(natsauth.Admin), natsauth.Password(natsauth.Admin))); err == nil {
				js, _ := jetstream.New(nc)
				part := ids.Partition(d.uid, 4)
				stream := streams.InboxStream(part)
				if c, err := js.Consumer(context.Background(), stream, streams.DeviceConsumer(d.uid, d.name)); err == nil {
					ci := c.CachedInfo()
					t.Logf("  consumer: delivered %+v ackfloor %+v pending %d ackpending %d waiting %d redelivered %d",
						ci.Delivered, ci.AckFloor, ci.NumPending, ci.NumAckPending, ci.NumWaiting, ci.NumRedelivered)
				}
				if st, err := js.Stream(context.Background(), stream); err == nil {
					if m, err := st.GetLastMsgForSubject(context.Background(), streams.InboxSubject(part, d.uid)); err == nil {
						t.Logf("  last entry of uid %d: seq %d", d.uid, m.Sequence)
					}
				}
				nc.Close()
			}
			// Which stored messages are missing, and does the inbox hold them?
			missing := 0
			w.sentMu.Lock()
			for _, snd := range w.sent {
				if snd.msgID == 0 || !slices.Contains(w.members(snd.conv), d.uid) || d.has(snd.msgID) {
					continue
				}
				missing++
				if missing <= 3 {
					var seq int64
					err := pgxQueryRow(w.h.dbURL, `SELECT seq FROM inbox_archive WHERE uid = $1 AND msg_id = $2`, d.uid, snd.msgID).Scan(&seq)
					var fanned bool
					_ = pgxQueryRow(w.h.dbURL, `SELECT fanned_out FROM msg_content WHERE msg_id = $1`, snd.msgID).Scan(&fanned)
					t.Logf("  missing %s msg %d conv %d seq %d: inbox entry seq %d (err %v), fanned_out %v", snd.cmid, snd.msgID, snd.conv, snd.convSeq, seq, err, fanned)
					d.watch(snd.msgID)
				}
			}
			w.sentMu.Unlock()
			t.Logf("  %d missing", missing)
			for i, gw := range w.h.debugGWs {
				if resp, err := http.Get("http://" + gw + "/debug/pprof/goroutine?debug=2"); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					f := filepath.Join(os.TempDir(), fmt.Sprintf("inboxd-chaos-gateway%d-goroutines.txt", i+1))
					if os.WriteFile(f, b, 0o644) == nil {
						t.Logf("  goroutines of gateway %s: %s", gw, f)
					}
				}
			}
			d.disconnect()
			_ = d.connect(t)
		}
		deadline = time.Now().Add(time.Minute)
		for len(w.incomplete()) > 0 && time.Now().Before(deadline) {
			time.Sleep(500 * time.Millisecond)
		}
	}
	time.Sleep(2 * time.Second) // late duplicates would show now
	for _, d := range w.devices {
		d.disconnect()
	}
}

// missingFaults are the kinds of faultKinds not injected yet (and not
// failed: a failure fails the run, trying again would only delay it).
func (w *world) missingFaults() []string {
	w.sentMu.Lock()
	defer w.sentMu.Unlock()
	var out []string
	for _, k := range w.kinds {
		if w.faults[k] == 0 && w.failed[k] == nil {
			out = append(out, k)
		}
	}
	return out
}

// sendAway keeps one device at a time offline until the messages stored
// for it since exceed the offline threshold and its newest page, then
// brings it back: its login is offline too long, and the drain after the
// newest page has older messages to deliver in order. It stops when the
// senders are done (no backlog grows any more).
func (w *world) sendAway(sendersDone <-chan struct{}) {
	for {
		select {
		case <-sendersDone:
			return
		default:
		}
		d := w.devices[w.intn(len(w.devices))]
		d.setAway(true)
		d.disconnect()
		from := w.storedFor(d.uid)
	wait:
		for w.storedFor(d.uid)-from <= w.pl.offlineThreshold+pageSize[d.kind] {
			select {
			case <-sendersDone:
				break wait
			case <-time.After(100 * time.Millisecond):
			}
		}
		d.setAway(false)
		_ = d.connect(w.t) // on failure churn or the quiescence connects it
	}
}

// storedFor counts the messages STORED so far in uid's conversations.
func (w *world) storedFor(uid int64) int {
	w.sentMu.Lock()
	defer w.sentMu.Unlock()
	n := 0
	for _, s := range w.sent {
		if s.msgID != 0 && slices.Contains(w.members(s.conv), uid) {
			n++
		}
	}
	return n
}

// systemFaults counts the injected process and network faults (kills,
// restarts, half-open connections), not the workload's vanishing clients
// and senders: the plan's minFaults is about these.
func (w *world) systemFaults() int {
	w.sentMu.Lock()
	defer w.sentMu.Unlock()
	n := 0
	for k, c := range w.faults {
		if k != "client-vanish" && k != "sender-vanish" {
			n += c
		}
	}
	return n
}

// sender sends per messages from random users to their conversations; now
// and then it vanishes right after a send (before STORED) and retries the
// same client_msg_id later from a new connection.
func (w *world) sender(s, per int) {
	t := w.t
	var c *client.Client
	var uid int64
	connect := func() {
		uid = int64(1 + w.intn(w.pl.users))
		for len(w.byUser[uid]) == 0 {
			uid = int64(1 + w.intn(w.pl.users))
		}
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var err error
			c, err = client.Dial(ctx, client.Options{URL: "tcp://" + w.h.tcpAddr(s),
				Token: testenv.Token(t, uid, "sender-"+strconv.Itoa(s)), MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
			cancel()
			if err == nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	connect()
	var retry []*sent // sends abandoned before their answer
	type inflight struct {
		snd *sent
		p   *client.PendingSend
	}
	var window []inflight // sends pipelined in order, as a chat client does
	drain := func(keep int) bool {
		for len(window) > keep {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			r, err := window[0].p.Wait(ctx)
			cancel()
			if err != nil {
				t.Errorf("send %s: %v", window[0].snd.cmid, err)
				return false
			}
			w.record(window[0].snd, r)
			window = window[1:]
		}
		return true
	}
	for i := 0; i < per; i++ {
		cv := w.convs[w.byUser[uid][w.intn(len(w.byUser[uid]))]]
		snd := &sent{cmid: fmt.Sprintf("s%d-%d", s, i), sender: uid, conv: cv.id}
		w.sentMu.Lock()
		w.sent[snd.cmid] = snd
		w.sentMu.Unlock()
		p := c.SendAsync(cv.id, snd.cmid, "chaos "+snd.cmid)
		if w.intn(200) == 0 {
			// Vanish right after sending: the answers of everything in
			// flight are never read; the sends are retried later.
			c.Close()
			w.count("sender-vanish")
			retry = append(retry, snd)
			for _, f := range window {
				retry = append(retry, f.snd)
			}
			window = window[:0]
			time.Sleep(100 * time.Millisecond)
			connect()
			continue
		}
		window = append(window, inflight{snd, p})
		if !drain(16) {
			return
		}
		time.Sleep(w.pl.sendEvery)
	}
	if !drain(0) {
		return
	}
	// The vanished sends, retried with the same ids: STORED once.
	for _, snd := range retry {
		c.Close()
		uid = snd.sender
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			var err error
			c, err = client.Dial(ctx, client.Options{URL: "tcp://" + w.h.tcpAddr(s),
				Token: testenv.Token(t, uid, "sender-retry-"+strconv.Itoa(s))})
			cancel()
			if err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		r, err := c.Send(ctx, snd.conv, snd.cmid, "chaos "+snd.cmid)
		cancel()
		if err != nil {
			t.Errorf("retry %s: %v", snd.cmid, err)
			continue
		}
		w.record(snd, r)
	}
	c.Close()
}

func (w *world) record(snd *sent, r client.Result) {
	w.sentMu.Lock()
	defer w.sentMu.Unlock()
	if snd.msgID != 0 && (snd.msgID != r.MsgID || snd.convSeq != r.ConvSeq) {
		w.t.Errorf("send %s answered twice differently: %d/%d then %d/%d", snd.cmid, snd.msgID, snd.convSeq, r.MsgID, r.ConvSeq)
	}
	snd.msgID, snd.convSeq = r.MsgID, r.ConvSeq
}

func (w *world) count(kind string) {
	w.sentMu.Lock()
	w.faults[kind]++
	w.sentMu.Unlock()
}

// churn makes devices disconnect (cleanly: drained partially, they confirm
// what they stored), vanish mid-backfill (connections dropped under them)
// and come back.
func (w *world) churn(done chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-time.After(time.Duration(100+w.intn(300)) * time.Millisecond):
		}
		d := w.devices[w.intn(len(w.devices))]
		switch w.intn(3) {
		case 0:
			d.disconnect()
			go func() {
				time.Sleep(time.Duration(200+w.intn(2000)) * time.Millisecond)
				_ = d.connect(w.t)
			}()
		case 1:
			d.proxy.Close() // vanish: connections dropped without goodbye
			d.proxy = testenv.StartProxy(w.t, d.gw)
			// The client reconnects to its URL, the old proxy address:
			// restart the app on the new one.
			d.disconnect()
			_ = d.connect(w.t)
			w.count("client-vanish")
		default:
			_ = d.connect(w.t)
		}
	}
}

// powerCuts counts the power cuts so far (of the box, of the whole
// cluster).
func (w *world) powerCuts() int {
	w.sentMu.Lock()
	defer w.sentMu.Unlock()
	return w.faults["power-cut"] + w.faults["cluster-power-cut"]
}

// powerCutKind is the run's power cut: of the one box, or of every node of
// the cluster at once.
func (w *world) powerCutKind() string {
	if w.cluster != nil {
		return "cluster-power-cut"
	}
	return "power-cut"
}

// cutPages adds a power cut's losses to the run's.
func (w *world) cutPages(r powercut.CutReport) {
	w.sentMu.Lock()
	defer w.sentMu.Unlock()
	w.cuts.FilesTouched += r.FilesTouched
	w.cuts.PagesDropped += r.PagesDropped
	w.cuts.PagesKept += r.PagesKept
	w.cuts.BytesDropped += r.BytesDropped
	w.cuts.TornFiles += r.TornFiles
}

// inject hits the system with one fault at a time and measures recovery:
// the time from the fault's end until a probe send is STORED and delivered.
func (w *world) inject(done chan struct{}) {
	kinds := w.kinds
	probe := w.newDevice(1, "probe", "desktop")
	if err := probe.connectWithin(w.t, time.Minute); err != nil {
		w.t.Fatal(err)
	}
	defer probe.disconnect()
	for i := 0; ; i++ {
		select {
		case <-done:
			return
		case <-time.After(w.pl.faultEvery):
		}
		kind := kinds[i%len(kinds)]
		if i >= len(kinds) {
			kind = kinds[w.intn(len(kinds))]
			if m := w.missingFaults(); len(m) > 0 {
				kind = m[0]
			} else if w.pl.minNATSKills > 0 && w.natsKills() < w.pl.minNATSKills && i%2 == 0 {
				// Every other fault a NATS node until the plan's count.
				kind = []string{"kill-nats-leader", "kill-nats-follower"}[w.intn(2)]
			} else if w.pl.minPowerCuts > 0 && w.powerCuts() < w.pl.minPowerCuts && i%2 == 0 {
				kind = w.powerCutKind() // every other fault until the plan's count
			}
		}
		down := time.Duration(300+w.intn(1500)) * time.Millisecond
		switch kind {
		case "kill-gateway":
			gw := w.h.gateways[w.intn(len(w.h.gateways))]
			gw.kill()
			time.Sleep(down)
			gw.up()
		case "kill-fanout":
			f := w.h.fanouts[w.intn(len(w.h.fanouts))]
			f.kill()
			time.Sleep(down)
			f.up()
		case "kill-syncer":
			w.h.syncer.kill()
			time.Sleep(down)
			w.h.syncer.up()
		case "restart-nats":
			w.h.nats[0].kill()
			time.Sleep(down)
			w.h.nats[0].up()
		case "restart-postgres":
			if err := restartPostgres(w.h.dbURL); err != nil {
				w.sentMu.Lock()
				first := w.failed[kind] == nil
				w.failed[kind] = err
				w.sentMu.Unlock()
				if first {
					w.t.Errorf("restart-postgres: %v", err)
				}
				continue
			}
		case "pause":
			// Any process of the system, from a short stall to longer than
			// the fanout pin's priority_timeout (5 s) and a NATS route's
			// ping interval; then it goes on as if nothing happened.
			ps := w.h.procs
			p := ps[w.intn(len(ps))]
			d := []time.Duration{2 * time.Second, 6 * time.Second, 12 * time.Second}[w.intn(3)]
			w.t.Logf("pause %s for %s", p.name, d)
			p.pause(d)
		case "power-cut", "cluster-power-cut":
			// The short cluster run leaves Postgres alone (its plan has no
			// restart-postgres): the power goes at the NATS nodes' site.
			rep, err := w.h.powerCut(down, w.cluster == nil || slices.Contains(w.kinds, "restart-postgres"))
			if err != nil {
				w.sentMu.Lock()
				first := w.failed[kind] == nil
				w.failed[kind] = err
				w.sentMu.Unlock()
				if first {
					w.t.Errorf("power-cut: %v", err)
				}
				continue
			}
			w.cutPages(rep)
		case "half-open":
			d := w.devices[w.intn(len(w.devices))]
			d.proxy.Blackhole(true)
			time.Sleep(3 * down)
			d.proxy.Blackhole(false)
		default:
			// A NATS node of the cluster: its recovery is measured on the
			// probe fleet, from the kill on (cluster_test.go).
			if err := w.clusterFault(kind, i); err != nil {
				w.sentMu.Lock()
				first := w.failed[kind] == nil
				w.failed[kind] = err
				w.sentMu.Unlock()
				if first {
					w.t.Errorf("%s: %v", kind, err)
				}
			}
			continue
		}
		w.count(kind)
		if r, ok := w.probe(probe, i); ok {
			w.sentMu.Lock()
			w.recover[kind] = append(w.recover[kind], r)
			w.sentMu.Unlock()
		}
	}
}

// probe measures the time until a new message is STORED and reaches the
// probe device.
func (w *world) probe(p *device, i int) (time.Duration, bool) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var c *client.Client
	var dialErr error
	for c == nil && ctx.Err() == nil {
		c, dialErr = client.Dial(ctx, client.Options{URL: "tcp://" + w.h.tcpAddr(i), Token: testenv.Token(w.t, 1, "prober")})
		if dialErr != nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if c == nil {
		w.t.Logf("probe %d: no connection within 2 minutes: %v", i, dialErr)
		return 0, false
	}
	defer c.Close()
	cv := w.convs[w.byUser[1][0]]
	snd := &sent{cmid: "probe-" + strconv.Itoa(i), sender: 1, conv: cv.id}
	w.sentMu.Lock()
	w.sent[snd.cmid] = snd
	w.sentMu.Unlock()
	dialed := time.Since(start)
	r, err := c.Send(ctx, cv.id, snd.cmid, "probe")
	if err != nil {
		w.t.Logf("probe %d: send after %s: %v", i, time.Since(start), err)
		// Its outcome is still wanted by the oracle (stored late, it is
		// delivered): the same send again until it is answered.
		late, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if r, err = c.Send(late, cv.id, snd.cmid, "probe"); err == nil {
			w.record(snd, r)
		} else {
			w.t.Errorf("probe %d: no answer to the send within 5 minutes: %v", i, err)
		}
		return 0, false
	}
	stored := time.Since(start)
	w.record(snd, r)
	for ctx.Err() == nil {
		if p.has(r.MsgID) {
			if d := time.Since(start); d > 2*time.Second {
				w.t.Logf("slow recovery (%s): connected after %s, stored after %s, delivered after %s", snd.cmid, dialed, stored, d)
			}
			return time.Since(start), true
		}
		time.Sleep(10 * time.Millisecond)
	}
	w.t.Logf("probe %d: stored after %s, not on the probe device within 2 minutes (%s)", i, stored, p.name)
	return 0, false
}

func (w *world) members(convID int64) []int64 {
	for _, c := range w.convs {
		if c.id == convID {
			return c.members
		}
	}
	return nil
}

// incomplete returns the devices that miss stored messages (by count).
func (w *world) incomplete() []*device {
	w.sentMu.Lock()
	perConv := map[int64]int{} // stored sends per conversation
	for _, s := range w.sent {
		if s.msgID != 0 {
			perConv[s.conv]++
		}
	}
	w.sentMu.Unlock()
	var out []*device
	for _, d := range w.devices {
		want := 0
		for _, i := range w.byUser[d.uid] {
			want += perConv[w.convs[i].id]
		}
		d.mu.Lock()
		have := len(d.stored)
		d.mu.Unlock()
		if have < want {
			out = append(out, d)
		}
	}
	return out
}
