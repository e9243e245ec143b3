package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/natsauth"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// aioNode is one `inboxd` all-in-one process of a cluster test: its ports,
// its data directory, its command line and its log.
type aioNode struct {
	name                       string
	nats, route, http, ws, tcp int
	data, log                  string
	args                       []string
	cmd                        *exec.Cmd
	exited                     chan struct{}
	held                       []net.Listener // its ports while it is down (hold)
}

// hold keeps n's ports while n is down: another test of the run picking a
// free port (testenv.StablePort) could take one of them and fail n's
// restart ("bind: address already in use", seen in CI). A held port
// answers a connection by closing it, as near as a listener gets to the
// refusal a dead box's port gives.
func (n *aioNode) hold() {
	for _, p := range []int{n.nats, n.route, n.http, n.ws, n.tcp} {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // taken already: the restart will say so
		}
		n.held = append(n.held, ln)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
}

// release gives n's held ports back, for n's start.
func (n *aioNode) release() {
	for _, ln := range n.held {
		ln.Close()
	}
	n.held = nil
}

func (n *aioNode) wsURL() string   { return "ws://127.0.0.1:" + strconv.Itoa(n.ws) + "/ws" }
func (n *aioNode) natsURL() string { return "nats://127.0.0.1:" + strconv.Itoa(n.nats) }

// aioCluster is three all-in-one processes forming one installation on one
// Postgres database: every role on every node.
type aioCluster struct {
	t     *testing.T
	bin   string
	nodes []*aioNode
}

// buildInboxd builds ./cmd/inboxd once for the test.
func buildInboxd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "inboxd")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "github.com/inboxd/inboxd/cmd/inboxd")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build inboxd: %v\n%s", err, out)
	}
	return bin
}

// startAIOCluster starts three inboxd processes with --replicas 3 on free
// loopback ports (the README's three commands, with test settings) and
// waits until each is ready.
func startAIOCluster(t *testing.T, bin, databaseURL string) *aioCluster {
	c := &aioCluster{t: t, bin: bin}
	for i := range 3 {
		c.nodes = append(c.nodes, &aioNode{name: "n" + strconv.Itoa(i+1), nats: testenv.FreePort(t), route: testenv.FreePort(t),
			http: testenv.FreePort(t), ws: testenv.FreePort(t), tcp: testenv.FreePort(t), data: t.TempDir()})
	}
	l := testnode.Layout()
	for i, n := range c.nodes {
		var routes []string
		for j, o := range c.nodes {
			if j != i {
				routes = append(routes, "nats://127.0.0.1:"+strconv.Itoa(o.route))
			}
		}
		n.log = filepath.Join(t.TempDir(), n.name+".log")
		n.args = []string{"--name", n.name, "--data", n.data, "--replicas", "3",
			"--nats-listen", "127.0.0.1:" + strconv.Itoa(n.nats), "--cluster-listen", "127.0.0.1:" + strconv.Itoa(n.route),
			"--routes", strings.Join(routes, ","),
			"--http", "127.0.0.1:" + strconv.Itoa(n.http), "--ws", "127.0.0.1:" + strconv.Itoa(n.ws), "--tcp", "127.0.0.1:" + strconv.Itoa(n.tcp),
			"--database-url", databaseURL, "--token-secret", testenv.Secret,
			"--inbox-partitions", strconv.Itoa(l.InboxPartitions), "--send-partitions", strconv.Itoa(l.SendPartitions),
			"--new-device-max", "1000000", "--log-level", "info"}
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			c.kill(n)
			n.release()
		}
		if t.Failed() {
			for _, n := range c.nodes {
				b, _ := os.ReadFile(n.log)
				if len(b) > 6000 {
					b = b[len(b)-6000:]
				}
				t.Logf("--- %s log (tail) ---\n%s", n.name, b)
			}
		}
	})
	// The first node alone cannot place R3 streams: it waits for its
	// peers, saying so, instead of failing.
	c.start(c.nodes[0])
	c.waitLog(c.nodes[0], "waiting for the NATS cluster", 30*time.Second)
	if resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(c.nodes[0].http) + "/readyz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("a node of a 3-replica cluster is ready alone")
		}
	}
	for _, n := range c.nodes[1:] {
		c.start(n)
	}
	for _, n := range c.nodes {
		c.waitReady(n, 90*time.Second)
	}
	return c
}

// waitLog waits until n's log holds text.
func (c *aioCluster) waitLog(n *aioNode, text string, d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		if b, _ := os.ReadFile(n.log); bytes.Contains(b, []byte(text)) {
			return
		}
		select {
		case <-n.exited:
			c.t.Fatalf("%s exited while waiting for %q in its log", n.name, text)
		default:
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: no %q in its log after %s", n.name, text, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *aioCluster) start(n *aioNode) {
	c.t.Helper()
	f, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	n.release()
	n.cmd = exec.Command(c.bin, n.args...)
	n.cmd.Stdout, n.cmd.Stderr = f, f
	if err := n.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	n.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		_ = cmd.Wait()
		f.Close()
		close(exited)
	}(n.cmd, n.exited)
}

// kill ends n's process with SIGKILL (a box that dies), waits for it and
// holds its ports until it starts again.
func (c *aioCluster) kill(n *aioNode) {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
	n.cmd = nil
	n.hold()
}

func (c *aioCluster) waitReady(n *aioNode, d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-n.exited:
			c.t.Fatalf("%s exited before it was ready", n.name)
		default:
		}
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(n.http) + "/readyz")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("readyz %d: %s", resp.StatusCode, bytes.TrimSpace(b))
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	c.t.Fatalf("%s not ready after %s: %v", n.name, d, last)
}

// metric reads a metric of n (the sum of its series; -2 when absent).
func (c *aioCluster) metric(n *aioNode, name string) float64 {
	c.t.Helper()
	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(n.http) + "/metrics")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	sum, found := 0.0, false
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if rest[0] == '{' {
			_, rest, _ = strings.Cut(rest, "} ")
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil {
			c.t.Fatalf("metric %s: %q: %v", name, line, err)
		}
		sum, found = sum+f, true
	}
	if !found {
		return -2
	}
	return sum
}

// admin connects to node i's NATS server as the admin user.
func (c *aioCluster) admin(i int) *nats.Conn {
	c.t.Helper()
	nc, err := nats.Connect(c.nodes[i].natsURL(), nats.UserInfo(string(natsauth.Admin), natsauth.Password(natsauth.Admin)))
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(nc.Close)
	return nc
}

// device is a connected client that records what it received.
type clDevice struct {
	name string
	c    *client.Client
	mu   sync.Mutex
	got  map[int64]int // msg_id → times handed over
}

func connectClDevice(t *testing.T, url string, uid int64, dev string) *clDevice {
	t.Helper()
	d := &clDevice{name: fmt.Sprintf("%d/%s", uid, dev), got: map[int64]int{}}
	var err error
	d.c, err = client.Dial(ctxT(t, 20*time.Second), client.Options{URL: url, Token: testenv.Token(t, uid, dev), MaxBackoff: time.Second,
		Handler: func(m client.Message) error {
			d.mu.Lock()
			d.got[m.MsgID]++
			d.mu.Unlock()
			return nil
		}})
	if err != nil {
		t.Fatalf("dial %s as %s: %v", url, d.name, err)
	}
	t.Cleanup(func() { d.c.Close() })
	return d
}

// missing returns the msg_ids of want that d has not received.
func (d *clDevice) missing(want map[int64]bool) []int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []int64
	for id := range want {
		if d.got[id] == 0 {
			out = append(out, id)
		}
	}
	return out
}

// Three inboxd all-in-one processes form one installation (R3 streams,
// every role on every node): devices on different nodes send and receive;
// the node whose fanout processes the conversation's SEND partition is
// killed with SIGKILL, and sends on the other nodes go on with distinct
// msg_ids from the survivors' node ids, nothing lost; the node restarts,
// rejoins with a node id of its own, and its devices get everything. A
// device's second login on another node replaces the first, and live
// messages reach it there.
func TestAllInOneCluster(t *testing.T) {
	bin := buildInboxd(t)
	db := testenv.Database(t)
	c := startAIOCluster(t, bin, db)
	ctx := ctxT(t, 3*time.Minute)

	// R3 streams and the leases bucket, as `nats stream report` shows them.
	js, err := jetstream.New(c.admin(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{streams.SendStream, streams.InboxStream(0), "KV_inboxd_leases"} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		info := s.CachedInfo()
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			t.Fatalf("stream %s: %d replicas (cluster %+v), want 3", name, info.Config.Replicas, info.Cluster)
		}
	}
	// Every fanout leased a node id of its own.
	nodeIDs := map[int]string{}
	for _, n := range c.nodes {
		id := int(c.metric(n, "inboxd_fanout_node_id"))
		if id < 0 || nodeIDs[id] != "" {
			t.Fatalf("%s holds node id %d (others: %v): want a distinct one", n.name, id, nodeIDs)
		}
		nodeIDs[id] = n.name
	}

	ac := &admin.Client{NC: c.admin(1)}
	conv, err := ac.CreateConv(ctx, admin.CreateConvRequest{Members: []int64{1, 2, 3, 4}, Group: true})
	if err != nil {
		t.Fatal(err)
	}
	// Users 1..3 send, each through its own node; user 4 has a device on
	// every node.
	senders := make([]*clDevice, 3)
	watchers := make([]*clDevice, 3)
	for i, n := range c.nodes {
		senders[i] = connectClDevice(t, n.wsURL(), int64(i+1), "desk")
		watchers[i] = connectClDevice(t, n.wsURL(), 4, "d"+strconv.Itoa(i))
	}
	stored := map[int64]bool{}
	var storedMu sync.Mutex
	send := func(i int, tag string, count int) map[int64]bool {
		t.Helper()
		batch := map[int64]bool{}
		for k := range count {
			cmid := fmt.Sprintf("%s-%d-%d", tag, i, k)
			var res client.Result
			var err error
			for attempt := 0; attempt < 60; attempt++ { // same client_msg_id: idempotent
				sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				res, err = senders[i].c.Send(sctx, conv.ConvID, cmid, cmid)
				cancel()
				if err == nil {
					break
				}
			}
			if err != nil {
				t.Fatalf("send %s through %s: %v", cmid, c.nodes[i].name, err)
			}
			storedMu.Lock()
			if stored[res.MsgID] {
				storedMu.Unlock()
				t.Fatalf("msg_id %d issued twice (send %s)", res.MsgID, cmid)
			}
			stored[res.MsgID] = true
			storedMu.Unlock()
			batch[res.MsgID] = true
		}
		return batch
	}
	receive := func(devs []*clDevice, want map[int64]bool, d time.Duration) {
		t.Helper()
		deadline := time.Now().Add(d)
		for _, dv := range devs {
			for {
				miss := dv.missing(want)
				if len(miss) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("device %s misses %d of %d STORED messages (e.g. %v)", dv.name, len(miss), len(want), miss[:min(5, len(miss))])
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	allReceive := func(devs []*clDevice, d time.Duration) {
		t.Helper()
		storedMu.Lock()
		want := make(map[int64]bool, len(stored))
		for id := range stored {
			want[id] = true
		}
		storedMu.Unlock()
		receive(devs, want, d)
	}

	for i := range c.nodes {
		send(i, "before", 10)
	}
	allReceive(watchers, 30*time.Second)

	// The conversation's SEND partition is processed by one fanout (the
	// pinned one): the node whose fanout stored the sends.
	victim := -1
	for i, n := range c.nodes {
		if c.metric(n, "inboxd_fanout_sends_total") > 0 {
			if victim >= 0 {
				t.Logf("sends stored by %s and %s (the pin moved)", c.nodes[victim].name, n.name)
			}
			victim = i
		}
	}
	if victim < 0 {
		t.Fatal("no fanout stored the sends")
	}
	victimID := int(c.metric(c.nodes[victim], "inboxd_fanout_node_id"))
	t.Logf("killing %s (pinned fanout of the conversation's partition, node id %d)", c.nodes[victim].name, victimID)
	killedAt := time.Now()
	c.kill(c.nodes[victim])

	var survivors []int
	var liveWatchers []*clDevice
	for i := range c.nodes {
		if i != victim {
			survivors = append(survivors, i)
			liveWatchers = append(liveWatchers, watchers[i])
		}
	}
	before := len(stored)
	for _, i := range survivors {
		send(i, "first", 1)
		t.Logf("first send through %s stored %s after the kill", c.nodes[i].name, time.Since(killedAt).Round(100*time.Millisecond))
	}
	for _, i := range survivors {
		send(i, "during", 14)
	}
	allReceive(liveWatchers, 30*time.Second)
	survivorIDs := map[int]bool{}
	for _, i := range survivors {
		survivorIDs[int(c.metric(c.nodes[i], "inboxd_fanout_node_id"))] = true
	}
	storedMu.Lock()
	for id := range stored {
		if ids.Time(id).After(killedAt.Add(time.Second)) && !survivorIDs[ids.Node(id)] {
			t.Errorf("msg_id %d issued after the kill by node id %d, not a survivor's (%v)", id, ids.Node(id), survivorIDs)
		}
	}
	storedMu.Unlock()
	if len(stored) != before+15*len(survivors) {
		t.Fatalf("%d messages stored during the outage, want %d", len(stored)-before, 15*len(survivors))
	}

	// The node restarts on its data directory and rejoins: a node id of
	// its own (its old lease may still run), its devices reconnect and get
	// everything, its sender's sends are stored again.
	c.start(c.nodes[victim])
	c.waitReady(c.nodes[victim], 90*time.Second)
	rejoinedID := int(c.metric(c.nodes[victim], "inboxd_fanout_node_id"))
	if rejoinedID < 0 || survivorIDs[rejoinedID] {
		t.Fatalf("the restarted node holds node id %d; the survivors hold %v", rejoinedID, survivorIDs)
	}
	send(victim, "after", 10)
	for _, i := range survivors {
		send(i, "after", 5)
	}
	allReceive(watchers, 60*time.Second)
	allReceive(senders, 60*time.Second)

	// The archivers (pinned per partition, failed over like the fanouts)
	// copied every inbox entry once.
	st, err := store.Open(ctx, db, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var entries uint64
	for p := range testnode.Layout().InboxPartitions {
		s, err := js.Stream(ctx, streams.InboxStream(p))
		if err != nil {
			t.Fatal(err)
		}
		entries += s.CachedInfo().State.Msgs
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var archived uint64
		if err := st.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox_archive`).Scan(&archived); err != nil {
			t.Fatal(err)
		}
		if archived == entries {
			break
		}
		if archived > entries || time.Now().After(deadline) {
			t.Fatalf("%d entries archived, the INBOX streams hold %d", archived, entries)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A second login of a device on another node replaces the first, and
	// live messages reach it there.
	from, to := survivors[0], survivors[1]
	old := watchers[from]
	moved := connectClDevice(t, c.nodes[to].wsURL(), 4, "d"+strconv.Itoa(from))
	select {
	case <-old.c.Done():
		if !errors.Is(old.c.Err(), client.ErrReplaced) {
			t.Fatalf("the first login ended with %v, want ErrReplaced", old.c.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first login of the device was not replaced by the login on another node")
	}
	receive([]*clDevice{moved}, send(victim, "moved", 5), 30*time.Second)
}
