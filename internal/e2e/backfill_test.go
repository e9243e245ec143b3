package e2e

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// kindProfile is how the gateway promises to serve a device kind
// (docs/protocol.md "Receiving", internal/gateway/profiles.go): backfill
// batches of at most pageSize messages, at most window of them awaiting
// confirmation, and a backfill token bucket of rate messages a second with
// burst.
type kindProfile struct {
	pageSize, window int
	rate             float64
	burst            int
}

var kindProfiles = map[string]kindProfile{
	"mobile":  {pageSize: 100, window: 1, rate: 2000, burst: 500},
	"web":     {pageSize: 200, window: 2, rate: 5000, burst: 1000},
	"desktop": {pageSize: 500, window: 2, rate: 20000, burst: 2000},
}

// frames reads c's frames on a goroutine from now on (c.read must not be
// used any more), so that a test can wait for the next one with a timeout
// without cutting a frame in half.
func (c *rawTCP) frames() <-chan proto.Message {
	ch := make(chan proto.Message, 64)
	go func() {
		defer close(ch)
		for {
			_ = c.nc.SetReadDeadline(time.Time{})
			m := c.readQuiet()
			if m == nil {
				return
			}
			ch <- m
		}
	}()
	return ch
}

// readQuiet is read for a goroutine: nil on any error (the test's own
// timeouts report what was missing).
func (c *rawTCP) readQuiet() proto.Message {
	f, err := wire.ReadTCPFrame(c.r, nil, 1<<20)
	if err != nil {
		return nil
	}
	_, m, err := wire.Decode(f)
	if err != nil {
		return nil
	}
	return m
}

// helloAs logs in as uid's device of kind.
func (c *rawTCP) helloAs(uid int64, device, kind string) *pb.Welcome {
	c.t.Helper()
	c.write(&pb.Hello{Token: testenv.Token(c.t, uid, device), DeviceKind: kind})
	m := c.read()
	w, ok := m.(*pb.Welcome)
	if !ok {
		c.t.Fatalf("got %T %v, want welcome", m, m)
	}
	return w
}

// nextBackfill returns the next backfill batch within d, skipping other
// frames; nil if none came.
func nextBackfill(t *testing.T, frames <-chan proto.Message, d time.Duration) *pb.Batch {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case m, ok := <-frames:
			if !ok {
				t.Fatal("connection closed")
			}
			if b, ok := m.(*pb.Batch); ok && b.GetLane() == pb.Lane_BACKFILL {
				return b
			}
		case <-timeout:
			return nil
		}
	}
}

// Over the wire, each device kind's backfill comes in batches of at most its
// page size (and some of exactly that size), with at most its window of
// batches unconfirmed: while the client holds its acks with the window full
// nothing more comes, and the window does fill (it is not smaller). The
// welcome advertises the page size.
func TestBackfillPageSizeAndWindowByDeviceKind(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, true, 1, 2, 3, 4)
	const backlog = 1200
	sendN(t, n, 1, conv, backlog, "pw")
	// How long a held window must stay quiet: ample for a pump that ignored
	// the window to fetch and write another page (milliseconds here).
	const hold = 400 * time.Millisecond
	uid := map[string]int64{"mobile": 2, "web": 3, "desktop": 4}
	for kind, prof := range kindProfiles {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			c := dialRaw(t, n.Gateway.TCPAddr())
			w := c.helloAs(uid[kind], kind+"-1", kind)
			if int(w.GetPageSize()) != prof.pageSize {
				t.Fatalf("welcome page_size %d, want %d", w.GetPageSize(), prof.pageSize)
			}
			frames := c.frames()
			var unconfirmed []uint64
			got, full, holds := 0, 0, 0
			for {
				if len(unconfirmed) == prof.window {
					if b := nextBackfill(t, frames, hold); b != nil && len(b.GetMessages()) > 0 {
						t.Fatalf("batch %d (%d messages) came with %d batches unconfirmed; the %s window is %d",
							b.GetBatchId(), len(b.GetMessages()), len(unconfirmed), kind, prof.window)
					} else if b != nil && !b.GetHasMore() {
						break
					}
					holds++
					c.write(&pb.Ack{BatchIds: unconfirmed[:1]})
					unconfirmed = unconfirmed[1:]
					continue
				}
				wait := 10 * time.Second
				if len(unconfirmed) > 0 {
					wait = hold
				}
				b := nextBackfill(t, frames, wait)
				if b == nil && len(unconfirmed) > 0 {
					// The server may wait for confirmations below the
					// window too (the switch from the archive to the
					// consumer moves the consumer only to a confirmed
					// position): confirm one.
					c.write(&pb.Ack{BatchIds: unconfirmed[:1]})
					unconfirmed = unconfirmed[1:]
					continue
				}
				if b == nil {
					t.Fatalf("with %d of %d messages and nothing unconfirmed no batch came", got, backlog)
				}
				if k := len(b.GetMessages()); k > prof.pageSize {
					t.Fatalf("a %s batch of %d messages; page size %d", kind, k, prof.pageSize)
				} else if k == prof.pageSize {
					full++
				}
				got += len(b.GetMessages())
				if b.GetBatchId() != 0 {
					unconfirmed = append(unconfirmed, b.GetBatchId())
				}
				if !b.GetHasMore() {
					break
				}
			}
			if got != backlog {
				t.Fatalf("backfill ended after %d of %d messages", got, backlog)
			}
			if full == 0 || holds < 2 {
				t.Fatalf("%d full pages, %d held windows: the backlog did not exercise the profile", full, holds)
			}
			t.Logf("%s: %d messages, %d full pages of %d, window %d held %d times", kind, got, full, prof.pageSize, prof.window, holds)
		})
	}
}

// A multi-page catch-up on the wire: every backfill batch but the last says
// has_more, the last does not, and together they hold the whole backlog in
// seq order, each message once.
func TestBackfillHasMoreAcrossPages(t *testing.T) {
	n := testnode.AllInOne(t)
	conv := createConv(t, n, true, 1, 2, 3)
	const backlog = 1000
	ids := sendN(t, n, 1, conv, backlog, "hm")

	c := dialRaw(t, n.Gateway.TCPAddr())
	c.helloAs(2, "phone", "mobile")
	frames := c.frames()
	var pages []*pb.Batch
	for {
		b := nextBackfill(t, frames, 10*time.Second)
		if b == nil {
			t.Fatalf("after %d batches no backfill batch came and none said has_more=false", len(pages))
		}
		pages = append(pages, b)
		if b.GetBatchId() != 0 {
			c.write(&pb.Ack{BatchIds: []uint64{b.GetBatchId()}})
		}
		if !b.GetHasMore() {
			break
		}
	}
	if b := nextBackfill(t, frames, 500*time.Millisecond); b != nil {
		t.Fatalf("a backfill batch (%d messages, has_more %v) after the one that said has_more=false", len(b.GetMessages()), b.GetHasMore())
	}
	if len(pages) < 3 {
		t.Fatalf("%d batches: not a multi-page catch-up", len(pages))
	}
	var msgs []*pb.Message
	for i, b := range pages {
		if i < len(pages)-1 && !b.GetHasMore() {
			t.Fatalf("batch %d of %d says has_more=false", i+1, len(pages))
		}
		msgs = append(msgs, b.GetMessages()...)
	}
	if len(msgs) != backlog {
		t.Fatalf("%d messages in %d batches, want %d", len(msgs), len(pages), backlog)
	}
	for i, m := range msgs {
		if i > 0 && m.GetSeq() <= msgs[i-1].GetSeq() {
			t.Fatalf("message %d: seq %d after %d", i, m.GetSeq(), msgs[i-1].GetSeq())
		}
		if m.GetMsgId() != ids[i] {
			t.Fatalf("message %d is msg %d, want %d (the backlog in order, once)", i, m.GetMsgId(), ids[i])
		}
	}
	t.Logf("%d messages in %d batches", len(msgs), len(pages))
}

// The backfill token buckets: however fast or slow the machine, the
// backfill messages a device has by time T since it connected never exceed
// burst + rate·T, for the per-user bucket (set low through the gateway
// options) and for the device kind's own (mobile: 2,000/s, burst 500).
// An upper bound only: a slow machine stays under it anyway.
func TestBackfillTokenBucket(t *testing.T) {
	n := testnode.AllInOne(t)
	cases := []struct {
		name    string
		addr    string
		uid     int64
		backlog int
		rate    float64
		burst   int
	}{
		{"per user", testnode.Gateway(t, n, gateway.Options{UserBackfillRate: 200, UserBackfillBurst: 100}).TCPAddr(), 2, 600, 200, 100},
		// A burst below the page size (mobile pages are 100): a page's
		// tokens are taken in pieces, not one burst for the whole page.
		{"per user, burst below the page", testnode.Gateway(t, n, gateway.Options{UserBackfillRate: 100, UserBackfillBurst: 20}).TCPAddr(), 4, 300, 100, 20},
		{"mobile kind", n.Gateway.TCPAddr(), 3, 4000, kindProfiles["mobile"].rate, kindProfiles["mobile"].burst},
	}
	for _, tc := range cases {
		// A conversation of its own per device: its backlog is its own.
		sendN(t, n, 1, createConv(t, n, true, 1, tc.uid), tc.backlog, "tb"+strconv.FormatInt(tc.uid, 10))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, tc.addr)
			start := time.Now() // before the login: T is only overestimated
			c.helloAs(tc.uid, "phone", "mobile")
			frames := c.frames()
			got := 0
			for got < tc.backlog {
				b := nextBackfill(t, frames, 30*time.Second)
				if b == nil {
					t.Fatalf("backfill stalled at %d of %d messages", got, tc.backlog)
				}
				got += len(b.GetMessages())
				elapsed := time.Since(start)
				if bound := float64(tc.burst) + tc.rate*elapsed.Seconds(); float64(got) > bound {
					t.Fatalf("%d messages after %s: more than burst %d + %.0f/s · T = %.0f", got, elapsed.Round(time.Millisecond), tc.burst, tc.rate, bound)
				}
				if b.GetBatchId() != 0 {
					c.write(&pb.Ack{BatchIds: []uint64{b.GetBatchId()}})
				}
				if !b.GetHasMore() && got < tc.backlog {
					t.Fatalf("backfill ended at %d of %d messages", got, tc.backlog)
				}
			}
			t.Logf("%d messages in %s (bucket %.0f/s, burst %d)", got, time.Since(start).Round(time.Millisecond), tc.rate, tc.burst)
		})
	}
}
