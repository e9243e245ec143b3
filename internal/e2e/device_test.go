package e2e

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/testenv"
)

// device is an application on top of the client package: it stores what it
// is handed (in memory) and lets tests wait for it.
type device struct {
	t    testing.TB
	c    *client.Client
	mu   sync.Mutex
	got  []client.Message
	cond chan struct{}
	stop int // return ErrStop after this many (0: never)
}

type deviceOpts struct {
	transport string // "ws" (default) or "tcp"
	kind      string
	noAck     bool
	stopAfter int
	url       string // overrides the gateway URL (a proxy in front of it)
}

func connectDevice(t testing.TB, n *node.Node, uid int64, name string, o deviceOpts) *device {
	t.Helper()
	d := &device{t: t, cond: make(chan struct{}, 1), stop: o.stopAfter}
	url := o.url
	if url == "" {
		url = n.Gateway.WSURL()
		if o.transport == "tcp" {
			url = "tcp://" + n.Gateway.TCPAddr()
		}
	}
	c, err := client.Dial(ctxT(t, 20*time.Second), client.Options{
		URL: url, Token: testenv.Token(t, uid, name), DeviceKind: o.kind, NoAck: o.noAck,
		Handler: d.handle, MinBackoff: 50 * time.Millisecond, MaxBackoff: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("connect %d/%s: %v", uid, name, err)
	}
	d.c = c
	t.Cleanup(func() { c.Close() })
	return d
}

func (d *device) handle(m client.Message) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stop > 0 && len(d.got) >= d.stop {
		return client.ErrStop
	}
	d.got = append(d.got, m)
	select {
	case d.cond <- struct{}{}:
	default:
	}
	return nil
}

func (d *device) messages() []client.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]client.Message(nil), d.got...)
}

func (d *device) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got)
}

// waitFor waits until the device holds n messages.
func (d *device) waitFor(n int, within time.Duration) []client.Message {
	d.t.Helper()
	deadline := time.After(within)
	for d.count() < n {
		select {
		case <-d.cond:
		case <-deadline:
			d.t.Fatalf("device has %d of %d messages after %s", d.count(), n, within)
		}
	}
	return d.messages()
}

// quiet waits until nothing new arrived for d, and returns everything.
func (d *device) quiet(d0 time.Duration) []client.Message {
	last := d.count()
	for {
		time.Sleep(d0)
		if n := d.count(); n == last {
			return d.messages()
		} else {
			last = n
		}
	}
}

func (d *device) close() { d.c.Close() }

// sendN sends n messages from uid to conv, pipelined, and returns their
// msg_ids in send order.
func sendN(t testing.TB, n *node.Node, uid, conv int64, count int, prefix string) []int64 {
	t.Helper()
	c, err := client.Dial(ctxT(t, 20*time.Second), client.Options{URL: "tcp://" + n.Gateway.TCPAddr(), Token: testenv.Token(t, uid, "sender-"+prefix)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ids := make([]int64, 0, count)
	window := make([]*client.PendingSend, 0, 256)
	flush := func(k int) {
		for len(window) > k {
			r, err := window[0].Wait(ctx)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.MsgID)
			window = window[1:]
		}
	}
	for i := 0; i < count; i++ {
		flush(255)
		window = append(window, c.SendAsync(conv, prefix+"-"+strconv.Itoa(i), prefix+" message "+strconv.Itoa(i)))
	}
	flush(0)
	return ids
}

// checkOrderedOnce asserts that msgs hold each of want exactly once and, per
// conversation, in strictly increasing conv_seq.
func checkOrderedOnce(t testing.TB, msgs []client.Message, want []int64) {
	t.Helper()
	checkOnce(t, msgs, want, false)
}

// checkOnceNewestAhead is checkOrderedOnce for a device that was offline too
// long: messages of its newest page (Lane "newest") come ahead of conv_seq
// order by design; every other message must follow the conv_seq order of
// its conversation.
func checkOnceNewestAhead(t testing.TB, msgs []client.Message, want []int64) {
	t.Helper()
	checkOnce(t, msgs, want, true)
}

// checkOnce holds the assertions of checkOrderedOnce; newestAhead leaves
// the messages of the "newest" lane out of the order check.
func checkOnce(t testing.TB, msgs []client.Message, want []int64, newestAhead bool) {
	t.Helper()
	seen := map[int64]int{}
	last := map[int64]int64{}
	for _, m := range msgs {
		seen[m.MsgID]++
		if newestAhead && m.Lane == "newest" {
			continue
		}
		if m.ConvSeq <= last[m.ConvID] {
			t.Fatalf("conversation %d: conv_seq %d (%s lane) after %d", m.ConvID, m.ConvSeq, m.Lane, last[m.ConvID])
		}
		last[m.ConvID] = m.ConvSeq
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Fatalf("msg %d delivered %d times", id, seen[id])
		}
	}
	if len(msgs) != len(want) {
		t.Fatalf("%d messages delivered, want %d", len(msgs), len(want))
	}
}
