package chaos

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/testenv"
)

// device is an application on a phone or a desktop: it stores what it is
// handed (its "database" survives restarts of the app), and connects
// through its own proxy so the network can be cut under it.
type device struct {
	uid   int64
	name  string
	kind  string // device_kind: mobile or desktop
	gw    string // the gateway's TCP address its proxy forwards to
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
	// arrived, when set, is told of every message the app stores (the
	// cluster run's probe fleet times its recovery with it).
	arrived func(client.Message, time.Time)
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

// connectWithin connects the device, retrying refused logins (a login the
// gateway cannot serve now is refused with UNAVAILABLE: retry) until
// within has passed.
func (d *device) connectWithin(t *testing.T, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		err := d.connect(t)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		t.Logf("device %d/%s: login failed, retrying: %v", d.uid, d.name, err)
		time.Sleep(200 * time.Millisecond)
	}
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
	if d.arrived != nil {
		d.arrived(m, time.Now())
	}
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
