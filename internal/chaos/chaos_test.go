package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
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
}

var plans = map[string]plan{
	"short": {users: 16, groups: 3, directs: 8, messages: 3000, sendEvery: 20 * time.Millisecond, senders: 8, faultEvery: 1500 * time.Millisecond, minFaults: 6, offlineThreshold: 150},
	"long":  {users: 40, groups: 8, directs: 25, messages: 100000, sendEvery: 12 * time.Millisecond, senders: 16, faultEvery: time.Second, minFaults: 100, offlineThreshold: 1000},
}

// pageSize is the backfill page of each device kind (docs/protocol.md), the
// size of a newest page.
var pageSize = map[string]int{"mobile": 100, "desktop": 500}

// faultKinds are the process and network faults the suite injects; every
// run has each of them at least once.
var faultKinds = []string{"kill-gateway", "kill-fanout", "kill-syncer", "restart-nats", "restart-postgres", "half-open"}

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

// harness is the system under test: four processes and Postgres.
type harness struct {
	t        *testing.T
	dir      string
	natsPort int
	tcpPort  int
	dbURL    string
	nats     *proc
	gateway  *proc
	fanout   *proc
	syncer   *proc
	httpGW   string
}

func startHarness(t *testing.T, pl plan) *harness {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	out, err := exec.Command("go", "build", "-o", bin+"/", "../../cmd/inboxd", "../../cmd/gateway", "../../cmd/fanout", "../../cmd/syncer").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	h := &harness{t: t, dir: dir, natsPort: testenv.FreePort(t), tcpPort: testenv.FreePort(t), dbURL: testenv.Database(t)}
	natsURL := "nats://127.0.0.1:" + strconv.Itoa(h.natsPort)
	common := []string{"--database-url", h.dbURL, "--inbox-partitions", "4", "--send-partitions", "4", "--log-level", "warn"}
	h.nats = newProc(t, dir, "nats", bin+"/inboxd", "--nats-only", "--data", filepath.Join(dir, "nats"),
		"--nats-listen", "127.0.0.1:"+strconv.Itoa(h.natsPort), "--http", "127.0.0.1:0")
	h.httpGW = "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	h.gateway = newProc(t, dir, "gateway", bin+"/gateway", append([]string{"--nats", natsURL, "--tcp", "127.0.0.1:" + strconv.Itoa(h.tcpPort),
		"--ws", "127.0.0.1:0", "--http", h.httpGW, "--heartbeat", "2s", "--token-secret", testenv.Secret,
		"--new-device-max", "1000000000", "--send-rate", "100000", "--pull-rate", "1000",
		"--offline-threshold", strconv.Itoa(pl.offlineThreshold)}, common...)...)
	h.fanout = newProc(t, dir, "fanout", bin+"/fanout", append([]string{"--nats", natsURL, "--http", "127.0.0.1:0", "--node-id", "1"}, common...)...)
	h.syncer = newProc(t, dir, "syncer", bin+"/syncer", append([]string{"--nats", natsURL, "--http", "127.0.0.1:0"}, common...)...)
	t.Cleanup(func() {
		for _, p := range []*proc{h.gateway, h.fanout, h.syncer, h.nats} {
			p.stop()
		}
		if t.Failed() {
			for _, n := range []string{"gateway", "fanout", "syncer", "nats"} {
				b, _ := os.ReadFile(filepath.Join(dir, n+".log"))
				if len(b) > 4000 {
					b = b[len(b)-4000:]
				}
				t.Logf("--- %s.log (tail)\n%s", n, b)
			}
		}
	})
	h.waitHealthy(60 * time.Second)
	return h
}

func (h *harness) waitHealthy(within time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < within {
		resp, err := http.Get("http://" + h.httpGW + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return time.Since(start)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	h.t.Fatalf("gateway not healthy after %s", within)
	return 0
}

func (h *harness) natsURL() string { return "nats://127.0.0.1:" + strconv.Itoa(h.natsPort) }

// restartPostgres restarts the local cluster that serves url, found by its
// port in pg_lsclusters (fast shutdown: connections are cut mid-flight).
// It needs the Debian cluster tools and the right to run pg_ctlcluster; a
// failure fails the run (a run without the fault would not show it).
func restartPostgres(url string) error {
	version, name, err := clusterOf(url)
	if err != nil {
		return err
	}
	if b, err := exec.Command("pg_ctlcluster", version, name, "restart", "-m", "fast").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctlcluster %s %s restart: %w: %s", version, name, err, b)
	}
	return nil
}

// clusterOf finds the local cluster (version and name) listening on url's
// port: the suite must restart the Postgres it uses, not whichever cluster
// pg_lsclusters lists first.
func clusterOf(url string) (version, name string, err error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return "", "", err
	}
	if cfg.Host != "127.0.0.1" && cfg.Host != "localhost" && cfg.Host != "::1" && !strings.HasPrefix(cfg.Host, "/") {
		return "", "", fmt.Errorf("postgres at %s is not local: cannot restart it", cfg.Host)
	}
	out, err := exec.Command("pg_lsclusters", "-h").Output()
	if err != nil {
		return "", "", fmt.Errorf("pg_lsclusters: %w", err)
	}
	return clusterOnPort(string(out), int(cfg.Port))
}

// clusterOnPort finds the cluster on port in the output of `pg_lsclusters -h`.
func clusterOnPort(lsclusters string, port int) (version, name string, err error) {
	p := strconv.Itoa(port)
	for _, line := range strings.Split(lsclusters, "\n") {
		// Ver Cluster Port Status Owner Data-directory Log-file
		if f := strings.Fields(line); len(f) >= 3 && f[2] == p {
			return f[0], f[1], nil
		}
	}
	return "", "", fmt.Errorf("no local cluster on port %d in pg_lsclusters: %q", port, lsclusters)
}

// The suite restarts the cluster of its database URL, not the first one
// listed (which restarted a shared cluster under other tests).
func TestClusterOnPort(t *testing.T) {
	const ls = "15  main    5432 online postgres /var/lib/postgresql/15/main  /var/log/postgresql/postgresql-15-main.log\n" +
		"15  chaos   5433 online postgres /var/lib/postgresql/15/chaos /var/log/postgresql/postgresql-15-chaos.log\n"
	for port, want := range map[int]string{5432: "15/main", 5433: "15/chaos"} {
		v, n, err := clusterOnPort(ls, port)
		if err != nil || v+"/"+n != want {
			t.Fatalf("port %d: %s/%s %v, want %s", port, v, n, err, want)
		}
	}
	if _, _, err := clusterOnPort(ls, 5434); err == nil {
		t.Fatal("port 5434: found a cluster in a listing without one")
	}
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

// device is an application on a phone or a desktop: it stores what it is
// handed (its "database" survives restarts of the app), and connects
// through its own proxy so the network can be cut under it.
type device struct {
	uid   int64
	name  string
	kind  string // device_kind: mobile or desktop
	proxy *testenv.Proxy

	mu       sync.Mutex
	c        *client.Client
	stored   map[int64]client.Message // msg_id → message: the app's database
	order    map[int64][]handed       // conv → messages in the order handed over
	apps     int                      // app starts (client instances)
	dups     int                      // handed over although stored (after the client's dedupe)
	watched  map[int64]bool
	wireDups int  // dropped by the client package's dedupe
	away     bool // sent away by the workload: connect leaves it offline
	tooLong  int  // app starts whose welcome said offline_too_long
	newest   int  // messages handed over on the newest lane (offline too long)
}

// handed is one message handed to the app (for the order check and its
// diagnostics).
type handed struct {
	convSeq int64
	seq     uint64
	lane    string
	app     int // which start of the app got it
	at      time.Time
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
	stuck   int // devices that needed a fresh connection at the end
}

func newWorld(t *testing.T, h *harness, pl plan) *world {
	w := &world{t: t, h: h, pl: pl, rng: rand.New(rand.NewPCG(1, 2)), byUser: map[int64][]int{},
		sent: map[string]*sent{}, faults: map[string]int{}, failed: map[string]error{}, recover: map[string][]time.Duration{}}
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

func (w *world) newDevice(uid int64, name, kind string) *device {
	return &device{uid: uid, name: name, kind: kind, proxy: testenv.StartProxy(w.t, "127.0.0.1:"+strconv.Itoa(w.h.tcpPort)),
		stored: map[int64]client.Message{}, order: map[int64][]handed{}}
}

// connect starts the device's app (a new client instance).
func (d *device) connect(t *testing.T) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.c != nil || d.away {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Options{
		URL: "tcp://" + d.proxy.Addr(), Token: testenv.Token(t, d.uid, d.name), DeviceKind: d.kind,
		Handler: d.handle, Delivered: d.has, LastConvSeq: d.lastConvSeq, MinBackoff: 50 * time.Millisecond, MaxBackoff: time.Second,
	})
	if err != nil {
		return err
	}
	d.c = c
	d.apps++
	if c.Welcome().GetOfflineTooLong() {
		d.tooLong++
	}
	return nil
}

// setAway holds the device offline (true) or lets it connect again.
func (d *device) setAway(away bool) {
	d.mu.Lock()
	d.away = away
	d.mu.Unlock()
}

// lastConvSeq is where the app's store has a conversation in order: the
// highest conv_seq handed over in order. A newest page (offline too long)
// is ahead of that by design and does not count: the messages before it
// are still to come, and after a restart of the app the client must wait
// for them, not take them as late; the newest ones are in the store
// (Delivered) and skipped when the drain reaches them.
func (d *device) lastConvSeq(conv int64) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var last int64
	for _, h := range d.order[conv] {
		if h.lane != "newest" {
			last = max(last, h.convSeq)
		}
	}
	return last
}

// watch logs how a message arrives when it does (diagnostics).
func (d *device) watch(id int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watched == nil {
		d.watched = map[int64]bool{}
	}
	d.watched[id] = true
}

func (d *device) handle(m client.Message) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.watched[m.MsgID] {
		fmt.Printf("chaos: watched msg %d reached %d/%s on the %s lane (seq %d)\n", m.MsgID, d.uid, d.name, m.Lane, m.Seq)
	}
	if _, ok := d.stored[m.MsgID]; ok {
		d.dups++
		return nil
	}
	d.stored[m.MsgID] = m
	if m.Lane == "newest" {
		d.newest++
	}
	d.order[m.ConvID] = append(d.order[m.ConvID], handed{convSeq: m.ConvSeq, seq: m.Seq, lane: m.Lane, app: d.apps, at: time.Now()})
	return nil
}

func (d *device) has(id int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, ok := d.stored[id]
	return ok
}

// disconnect closes the app cleanly (it confirms what it stored).
func (d *device) disconnect() {
	d.mu.Lock()
	c := d.c
	d.c = nil
	d.mu.Unlock()
	if c != nil {
		st := c.Stats()
		c.Close()
		d.mu.Lock()
		d.wireDups += st.Duplicates
		d.mu.Unlock()
	}
}

func (w *world) run() {
	t := w.t
	for _, d := range w.devices {
		if err := d.connect(t); err != nil {
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
	for deadline := time.Now().Add(3 * time.Minute); w.systemFaults() < w.pl.minFaults || len(w.missingFaults()) > 0; {
		if time.Now().After(deadline) {
			t.Errorf("after 3 minutes more: %d faults of %d, never %v", w.systemFaults(), w.pl.minFaults, w.missingFaults())
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
		if err := d.connect(t); err != nil {
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
			if resp, err := http.Get("http://" + w.h.httpGW + "/debug/sessions?uid=" + strconv.FormatInt(d.uid, 10)); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
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
			if resp, err := http.Get("http://" + w.h.httpGW + "/debug/pprof/goroutine?debug=2"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				_ = os.WriteFile(filepath.Join(os.TempDir(), "inboxd-chaos-gateway-goroutines.txt"), b, 0o644)
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
	for _, k := range faultKinds {
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
			c, err = client.Dial(ctx, client.Options{URL: "tcp://127.0.0.1:" + strconv.Itoa(w.h.tcpPort),
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
			c, err = client.Dial(ctx, client.Options{URL: "tcp://127.0.0.1:" + strconv.Itoa(w.h.tcpPort),
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
			d.proxy = testenv.StartProxy(w.t, "127.0.0.1:"+strconv.Itoa(w.h.tcpPort))
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

// inject hits the system with one fault at a time and measures recovery:
// the time from the fault's end until a probe send is STORED and delivered.
func (w *world) inject(done chan struct{}) {
	kinds := faultKinds
	probe := w.newDevice(1, "probe", "desktop")
	if err := probe.connect(w.t); err != nil {
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
			}
		}
		down := time.Duration(300+w.intn(1500)) * time.Millisecond
		switch kind {
		case "kill-gateway":
			w.h.gateway.kill()
			time.Sleep(down)
			w.h.gateway.up()
		case "kill-fanout":
			w.h.fanout.kill()
			time.Sleep(down)
			w.h.fanout.up()
		case "kill-syncer":
			w.h.syncer.kill()
			time.Sleep(down)
			w.h.syncer.up()
		case "restart-nats":
			w.h.nats.kill()
			time.Sleep(down)
			w.h.nats.up()
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
		case "half-open":
			d := w.devices[w.intn(len(w.devices))]
			d.proxy.Blackhole(true)
			time.Sleep(3 * down)
			d.proxy.Blackhole(false)
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
	for c == nil && ctx.Err() == nil {
		var err error
		c, err = client.Dial(ctx, client.Options{URL: "tcp://127.0.0.1:" + strconv.Itoa(w.h.tcpPort), Token: testenv.Token(w.t, 1, "prober")})
		if err != nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if c == nil {
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

// report runs the oracle and prints the run's figures.
func (w *world) report() {
	t := w.t
	w.sentMu.Lock()
	defer w.sentMu.Unlock()
	stored := map[int64]*sent{}
	for _, s := range w.sent {
		if s.msgID != 0 {
			stored[s.msgID] = s
		}
	}
	var lost, dups, wireDups, orderViolations, phantoms, deliveries, tooLong, newest int
	for _, d := range w.devices {
		d.mu.Lock()
		dups += d.dups
		wireDups += d.wireDups
		tooLong += d.tooLong
		newest += d.newest
		for id := range d.stored {
			if _, ok := stored[id]; !ok {
				phantoms++
			}
		}
		for _, s := range stored {
			if slices.Contains(w.members(s.conv), d.uid) {
				deliveries++
				if _, ok := d.stored[s.msgID]; !ok {
					lost++
					if lost <= 5 {
						t.Errorf("lost: %s (msg %d, conv %d seq %d) never reached %d/%s", s.cmid, s.msgID, s.conv, s.convSeq, d.uid, d.name)
					}
				}
			}
		}
		// The newest page of an offline-too-long login is ahead of
		// conv_seq order by design (it counts for loss and duplicates
		// above); everything else comes in conv_seq order, the in-order
		// drain skipping what the newest page handed over.
		for conv, all := range d.order {
			var hs []handed
			for _, h := range all {
				if h.lane != "newest" {
					hs = append(hs, h)
				}
			}
			for i := 1; i < len(hs); i++ {
				if hs[i].convSeq <= hs[i-1].convSeq {
					orderViolations++
					if orderViolations <= 5 {
						a, b := hs[i-1], hs[i]
						t.Errorf("order: device %d/%s got conv %d seq %d after %d (%s lane seq %d app start %d at %s, then %s lane seq %d app start %d at %s)",
							d.uid, d.name, conv, b.convSeq, a.convSeq, a.lane, a.seq, a.app, a.at.Format("15:04:05.000"), b.lane, b.seq, b.app, b.at.Format("15:04:05.000"))
					}
				}
			}
		}
		d.mu.Unlock()
	}
	// conv_seq dense per conversation.
	perConv := map[int64][]int64{}
	for _, s := range stored {
		perConv[s.conv] = append(perConv[s.conv], s.convSeq)
	}
	gaps := 0
	for _, seqs := range perConv {
		sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
		for i, s := range seqs {
			if s != int64(i+1) {
				gaps++
				break
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "chaos run: %d messages stored, %d devices, %d deliveries checked\n", len(stored), len(w.devices), deliveries)
	kinds := make([]string, 0, len(w.faults))
	for k := range w.faults {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	total := 0
	for _, k := range kinds {
		total += w.faults[k]
		rs := w.recover[k]
		var sum, mx time.Duration
		for _, r := range rs {
			sum += r
			mx = max(mx, r)
		}
		avg := time.Duration(0)
		if len(rs) > 0 {
			avg = sum / time.Duration(len(rs))
		}
		if len(rs) == 0 {
			fmt.Fprintf(&b, "  fault %-18s x%-4d (workload event: no recovery to measure)\n", k, w.faults[k])
			continue
		}
		fmt.Fprintf(&b, "  fault %-18s x%-4d recovery avg %-8s max %s\n", k, w.faults[k], avg.Round(time.Millisecond), mx.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "  faults injected: %d (process and network: %d; the rest workload events)\n", total, total-w.faults["client-vanish"]-w.faults["sender-vanish"])
	fmt.Fprintf(&b, "  lost: %d   duplicates on the wire (dropped by the client): %d   duplicates after dedupe: %d\n", lost, wireDups, dups)
	fmt.Fprintf(&b, "  order violations: %d   conversations with conv_seq gaps: %d   messages never sent: %d\n", orderViolations, gaps, phantoms)
	fmt.Fprintf(&b, "  devices incomplete after quiescence until reconnected (stuck sessions): %d\n", w.stuck)
	fmt.Fprintf(&b, "  logins offline too long (--offline-threshold %d): %d   messages handed over on the newest lane: %d\n", w.pl.offlineThreshold, tooLong, newest)
	fmt.Fprintf(&b, "  process starts: gateway %d, fanout %d, syncer %d, nats %d\n", w.h.gateway.starts, w.h.fanout.starts, w.h.syncer.starts, w.h.nats.starts)
	t.Log("\n" + b.String())
	if out := os.Getenv("INBOXD_CHAOS_REPORT"); out != "" {
		_ = os.WriteFile(out, []byte(b.String()), 0o644)
	}
	if lost > 0 || orderViolations > 0 || phantoms > 0 || gaps > 0 || dups > 0 || w.stuck > 0 {
		t.Fatalf("guarantees broken: lost %d, order %d, phantom %d, gaps %d, dup after dedupe %d, stuck sessions %d", lost, orderViolations, phantoms, gaps, dups, w.stuck)
	}
	// The run must have been what it claims.
	var missing []string
	for _, k := range faultKinds {
		if w.faults[k] == 0 {
			missing = append(missing, fmt.Sprintf("%s (%v)", k, w.failed[k]))
		}
	}
	if len(missing) > 0 {
		t.Fatalf("faults never injected: %v", missing)
	}
	if tooLong == 0 || newest == 0 {
		t.Fatalf("no device came back offline too long (%d logins, %d newest-lane messages): the oracle did not cover that mode", tooLong, newest)
	}
}

func pgxQueryRow(url, q string, args ...any) pgx.Row {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		cancel()
		return errRow{err}
	}
	return rowCloser{conn.QueryRow(ctx, q, args...), func() { conn.Close(context.Background()); cancel() }}
}

type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }

type rowCloser struct {
	r     pgx.Row
	close func()
}

func (r rowCloser) Scan(dst ...any) error {
	defer r.close()
	return r.r.Scan(dst...)
}
