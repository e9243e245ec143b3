package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/internal/gateway"
	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire/pb"
)

// Limits that a reconnect cannot reset, and that weigh what a request
// costs (issue 13, item 3). Every test talks raw frames to a real gateway.

// dialRawFrom is dialRaw from a given loopback source address (the whole
// 127/8 is loopback on Linux), for per-address limits.
func dialRawFrom(t *testing.T, addr, local string) *rawTCP {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawTCP{t: t, nc: nc, r: bufio.NewReader(nc)}
}

// sendResult reads frames until the send result of cmid (others skipped).
func (c *rawTCP) sendResult(cmid string) *pb.SendResult {
	c.t.Helper()
	for {
		m := c.read()
		if m == nil {
			c.t.Fatalf("connection closed before the result of %s", cmid)
		}
		if r, ok := m.(*pb.SendResult); ok && r.GetClientMsgId() == cmid {
			return r
		}
	}
}

// waitNoSessions waits until the gateway holds no session of uid: its
// last session is gone (where the buckets used to be dropped).
func waitNoSessions(t *testing.T, g *gateway.Gateway, uid int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(g.Sessions(uid)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("user %d still has sessions on the gateway", uid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A client that reconnects whenever it is rate limited (connect, send
// until RATE_LIMITED, disconnect, wait until its session is gone, repeat)
// gets no more STORED sends than one long connection would: the burst and
// the rate over the elapsed time. The bound is an upper bound, not a
// speed: the test asserts nothing about how fast sends go.
func TestReconnectLoopCannotExceedSendRate(t *testing.T) {
	const rate, burst = 5, 10 // --send-rate 5: burst twice that
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.SendRate = rate
	n := testnode.StartNode(t, cfg, allRoles)
	conv := createConv(t, n, false, 1, 2)

	start := time.Now()
	stored, next := 0, 0
	const rounds = 6
	for range rounds {
		c := dialRaw(t, n.Gateway.TCPAddr())
		c.helloAs(1, "loop", "desktop")
		for {
			next++
			cmid := fmt.Sprintf("loop-%d", next)
			c.write(&pb.Send{ClientMsgId: cmid, ConvId: conv, Text: cmid})
			r := c.sendResult(cmid)
			if r.GetStatus() == pb.SendStatus_STORED {
				stored++
				continue
			}
			if r.GetCode() != pb.ErrorCode_RATE_LIMITED {
				t.Fatalf("send %s: %v", cmid, r)
			}
			break
		}
		c.nc.Close()
		waitNoSessions(t, n.Gateway, 1)
	}
	elapsed := time.Since(start)
	bound := burst + rate*elapsed.Seconds()
	t.Logf("%d rounds in %s: %d sends stored, bound %.1f", rounds, elapsed.Round(time.Millisecond), stored, bound)
	if float64(stored) > bound {
		t.Fatalf("a reconnect loop got %d sends stored in %s; one connection gets at most %.1f (burst %d + %d/s)",
			stored, elapsed.Round(time.Millisecond), bound, burst, rate)
	}
	if got := count(t, n, `SELECT count(*) FROM msg_content WHERE conv_id = $1`, conv); got != stored {
		t.Fatalf("%d messages in Postgres, %d answered STORED", got, stored)
	}
}

// sendAll writes count sends to conv at once and returns their results in
// the order of the sends (they come in any order: refusals at once).
func sendAll(t *testing.T, c *rawTCP, conv int64, prefix string, count int) []*pb.SendResult {
	t.Helper()
	for i := range count {
		cmid := fmt.Sprintf("%s-%d", prefix, i)
		c.write(&pb.Send{ClientMsgId: cmid, ConvId: conv, Text: cmid})
	}
	got := map[string]*pb.SendResult{}
	for len(got) < count {
		m := c.read()
		if m == nil {
			t.Fatalf("connection closed with %d of %d send results", len(got), count)
		}
		if r, ok := m.(*pb.SendResult); ok {
			got[r.GetClientMsgId()] = r
		}
	}
	out := make([]*pb.SendResult, count)
	for i := range count {
		out[i] = got[fmt.Sprintf("%s-%d", prefix, i)]
	}
	return out
}

// A send costs its conversation's member count: a sender in a group of
// 2,000 is limited by the inbox entries it writes, far below its send
// rate, while a sender in a direct conversation on the same gateway, with
// the same buckets, is not.
func TestBigGroupSenderLimitedByEntries(t *testing.T) {
	n := testnode.AllInOne(t)
	const members = 2000
	uids := make([]int64, members)
	for i := range uids {
		uids[i] = int64(i + 1)
	}
	group := createConv(t, n, true, uids...)
	direct := createConv(t, n, false, 5001, 5002)
	// 1,000 entries a second, a burst of 2,000: one send to the group from
	// a full bucket, then one every 2 s. The send rate (default 50/s,
	// burst 100) is far above the 10 sends of each sender.
	const entryRate, entryBurst = 1000, 2000
	g := testnode.Gateway(t, n, gateway.Options{SendEntryRate: entryRate, SendEntryBurst: entryBurst})

	big := dialRaw(t, g.TCPAddr())
	big.helloAs(1, "d", "desktop")
	start := time.Now()
	bigResults := sendAll(t, big, group, "big", 10)
	elapsed := time.Since(start)
	stored, limited := 0, 0
	for _, r := range bigResults {
		switch {
		case r.GetStatus() == pb.SendStatus_STORED:
			stored++
		case r.GetCode() == pb.ErrorCode_RATE_LIMITED && strings.Contains(r.GetMessage(), "inbox entries"):
			limited++
		default:
			t.Fatalf("big-group send: %v", r)
		}
	}
	bound := (entryBurst + entryRate*elapsed.Seconds()) / members
	t.Logf("big group: %d of 10 stored in %s (bound %.2f), %d refused for entries", stored, elapsed.Round(time.Millisecond), bound, limited)
	if float64(stored) > bound || limited == 0 {
		t.Fatalf("a sender in a %d-member group got %d of 10 sends stored in %s: its entries (%d/s, burst %d) allow %.2f",
			members, stored, elapsed.Round(time.Millisecond), entryRate, entryBurst, bound)
	}
	if got := count(t, n, `SELECT count(*) FROM msg_content WHERE conv_id = $1`, group); got != stored {
		t.Fatalf("%d group messages in Postgres, %d answered STORED", got, stored)
	}

	small := dialRaw(t, g.TCPAddr())
	small.helloAs(5001, "d", "desktop")
	for _, r := range sendAll(t, small, direct, "small", 10) {
		if r.GetStatus() != pb.SendStatus_STORED {
			t.Fatalf("direct send on the same gateway: %v", r)
		}
	}
}

// The device cap: a user's devices used within the reap period count; the
// next new device is refused at hello with LIMIT_EXCEEDED before its
// consumer or row exists, on the gateway that admitted the others at once
// (before the mirror wrote their rows) and on another one (from the rows);
// a known device still gets in.
func TestDeviceCapRefusesNewDeviceAdmitsKnown(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.MaxDevicesPerUser = 3
	n := testnode.StartNode(t, cfg, allRoles)
	const uid = 7
	for _, d := range []string{"a", "b", "c"} {
		c := dialRaw(t, n.Gateway.TCPAddr())
		c.helloAs(uid, d, "desktop")
		c.nc.Close()
	}
	refused := func(addr, device string) {
		t.Helper()
		c := dialRaw(t, addr)
		c.write(&pb.Hello{Token: testenv.Token(t, uid, device), DeviceKind: "desktop"})
		c.expectError(pb.ErrorCode_LIMIT_EXCEEDED, true)
	}
	refused(n.Gateway.TCPAddr(), "d")
	dialRaw(t, n.Gateway.TCPAddr()).helloAs(uid, "a", "desktop")

	// Another gateway counts the devices from their rows.
	deadline := time.Now().Add(10 * time.Second)
	for count(t, n, `SELECT count(*) FROM device_cursor WHERE uid = $1`, uid) < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the mirror did not write the devices' rows")
		}
		time.Sleep(50 * time.Millisecond)
	}
	g2 := testnode.Gateway(t, n, gateway.Options{MaxDevicesPerUser: 3})
	refused(g2.TCPAddr(), "e")
	dialRaw(t, g2.TCPAddr()).helloAs(uid, "b", "desktop")

	time.Sleep(1500 * time.Millisecond) // a mirror flush (every second) would have written them
	js, err := jetstream.New(n.NC)
	if err != nil {
		t.Fatal(err)
	}
	stream := streams.InboxStream(ids.Partition(uid, cfg.Layout.InboxPartitions))
	for _, d := range []string{"d", "e"} {
		if got := count(t, n, `SELECT count(*) FROM device_cursor WHERE uid = $1 AND device = $2`, uid, d); got != 0 {
			t.Errorf("refused device %s has a device_cursor row", d)
		}
		if _, err := js.Consumer(context.Background(), stream, streams.DeviceConsumer(uid, d)); !errors.Is(err, jetstream.ErrConsumerNotFound) {
			t.Errorf("refused device %s: consumer lookup %v, want not found", d, err)
		}
	}
}

// Floods of each request the request rate covers get RATE_LIMITED (not
// fatal, with retry_after_ms and the request's id where it has one), no
// more than burst + rate × elapsed are acted on, and the user's live
// messages keep coming on the same connection.
func TestRequestFloodsRateLimitedLiveGoesOn(t *testing.T) {
	const rate, burst = 5, 10 // --request-rate 5: burst twice that
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.RequestRate = rate
	n := testnode.StartNode(t, cfg, allRoles)
	sender := dial(t, n, "ws", 1, "sender")

	kinds := []struct {
		name  string
		frame func(uid, conv int64, id uint64) proto.Message
	}{
		{"summary_request", func(_, _ int64, id uint64) proto.Message { return &pb.SummaryRequest{RequestId: id} }},
		{"read", func(_, conv int64, id uint64) proto.Message {
			return &pb.Read{RequestId: id, ConvId: conv, UpToConvSeq: 1}
		}},
		{"read_count", func(_, conv int64, id uint64) proto.Message {
			return &pb.ReadCount{RequestId: id, ConvId: conv, ConvSeq: 1}
		}},
		{"ack_range", func(_, _ int64, _ uint64) proto.Message { return &pb.AckRange{UpToSeq: 0} }},
		{"refresh", func(uid, _ int64, id uint64) proto.Message {
			return &pb.Refresh{RequestId: id, Token: testenv.Token(t, uid, "flood")}
		}},
	}
	for i, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			uid := int64(100 + i) // a user of its own: a bucket of its own
			conv := createConv(t, n, false, 1, uid)
			c := dialRaw(t, n.Gateway.TCPAddr())
			c.helloAs(uid, "flood", "desktop")
			frames := c.frames()
			const flood = 40
			const counter = `inboxd_gateway_rate_limited_total{limit="requests"}`
			before := metric(t, n, counter)
			start := time.Now()
			for id := uint64(1); id <= flood; id++ {
				c.write(k.frame(uid, conv, id))
			}
			// Refusals are answered in order, before the pong.
			c.write(&pb.Ping{Nonce: 7})
			elapsed := time.Duration(0)
			limited := 0
			for elapsed == 0 {
				select {
				case m, ok := <-frames:
					if !ok {
						t.Fatal("the connection closed during the flood")
					}
					switch m := m.(type) {
					case *pb.Error:
						if m.GetCode() != pb.ErrorCode_RATE_LIMITED {
							continue // the refresh frame is not served on every branch yet
						}
						hasID := k.name != "ack_range"
						if m.GetFatal() || m.GetRetryAfterMs() == 0 || hasID != (m.GetRequestId() >= 1 && m.GetRequestId() <= flood) {
							t.Fatalf("RATE_LIMITED answer %v: want not fatal, with retry_after_ms and (but for ack_range) the request's id", m)
						}
						limited++
					case *pb.Pong:
						elapsed = time.Since(start)
					}
				case <-time.After(10 * time.Second):
					t.Fatal("no pong after the flood")
				}
			}
			// Some of the first ones may be refused by the cap on requests
			// in flight on a connection (4) instead: the request rate's
			// own refusals are told apart by its counter.
			bound := burst + rate*elapsed.Seconds()
			byRate := metric(t, n, counter) - before
			if acted := flood - limited; float64(acted) > bound || byRate < flood-bound {
				t.Fatalf("%d %s frames in %s: %d acted on, %d RATE_LIMITED (%.0f by the request rate); the request rate allows %.1f",
					flood, k.name, elapsed.Round(time.Millisecond), acted, limited, byRate, bound)
			}
			// The user's live messages are not held up.
			res, err := sender.Send(ctxT(t, 10*time.Second), conv, fmt.Sprintf("live-%d", uid), "live")
			if err != nil {
				t.Fatal(err)
			}
			deadline := time.After(10 * time.Second)
			for {
				select {
				case m, ok := <-frames:
					if !ok {
						t.Fatal("the connection closed before the live message")
					}
					if b, isBatch := m.(*pb.Batch); isBatch && b.GetLane() == pb.Lane_LIVE {
						for _, msg := range b.GetMessages() {
							if msg.GetMsgId() == res.MsgID {
								return
							}
						}
					}
				case <-deadline:
					t.Fatal("the live message did not come after the flood")
				}
			}
		})
	}
}

// An ack_range refused by the request rate moves nothing: the entries it
// named come again on the next connection (a repeat, never a skip).
func TestRateLimitedAckRangeSkipsNothing(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.RequestRate = 1 // burst 2
	n := testnode.StartNode(t, cfg, allRoles)
	const uid = 300
	conv := createConv(t, n, false, 1, uid)
	want := sendN(t, n, 1, conv, 5, "skip")

	c := dialRaw(t, n.Gateway.TCPAddr())
	if w := c.helloAs(uid, "phone", "desktop"); w.GetCursor() != 0 {
		t.Fatalf("first login at cursor %d", w.GetCursor())
	}
	b := c.nextBatch()
	if len(b.GetMessages()) != len(want) {
		t.Fatalf("first batch holds %d messages, want %d", len(b.GetMessages()), len(want))
	}
	last := b.GetMessages()[len(want)-1].GetSeq()
	// Two ack_ranges that change nothing take the burst; the third, which
	// would confirm everything, is refused.
	c.write(&pb.AckRange{UpToSeq: 0})
	c.write(&pb.AckRange{UpToSeq: 0})
	c.write(&pb.AckRange{UpToSeq: last})
	c.write(&pb.Ping{Nonce: 1})
	limited := 0
	for {
		m := c.read()
		if m == nil {
			t.Fatal("connection closed")
		}
		if e, ok := m.(*pb.Error); ok && e.GetCode() == pb.ErrorCode_RATE_LIMITED && strings.Contains(e.GetMessage(), "ack_range") {
			limited++
		}
		if _, ok := m.(*pb.Pong); ok {
			break
		}
	}
	if limited != 1 {
		t.Fatalf("%d ack_ranges refused, want the third", limited)
	}
	c.nc.Close()
	waitNoSessions(t, n.Gateway, uid)

	c = dialRaw(t, n.Gateway.TCPAddr())
	if w := c.helloAs(uid, "phone", "desktop"); w.GetCursor() != 0 {
		t.Fatalf("after a refused ack_range up to %d the cursor is %d, want 0 (nothing confirmed)", last, w.GetCursor())
	}
	again := c.nextBatch().GetMessages()
	if len(again) != len(want) {
		t.Fatalf("after a refused ack_range %d messages came again, want %d", len(again), len(want))
	}
	for i, m := range again {
		if m.GetMsgId() != want[i] {
			t.Fatalf("message %d is %d, want %d", i, m.GetMsgId(), want[i])
		}
	}
}

// stillOpen reports whether the gateway keeps c open: a read that times
// out (nothing came, nothing closed) rather than EOF or a reset.
func stillOpen(c net.Conn, wait time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// closedAtOnce reports whether the gateway closed c (EOF or a reset)
// within a few seconds.
func closedAtOnce(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return errors.Is(err, io.EOF) || (err != nil && strings.Contains(err.Error(), "reset"))
}

// Connections that have not finished hello are capped per remote address
// and in total: idle sockets beyond either cap are closed at once
// (counted), whichever listener they came to; logged-in connections do
// not count and keep working, and a login gets in again once the idle
// sockets are gone.
func TestIdleUnauthenticatedSocketsBeyondCapsClosed(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.PreauthConns, cfg.PreauthConnsPerIP = 6, 3
	n := testnode.StartNode(t, cfg, allRoles)
	tcp := n.Gateway.TCPAddr()
	wsAddr := strings.TrimSuffix(strings.TrimPrefix(n.Gateway.WSURL(), "ws://"), "/ws")

	// 127.0.0.1 takes its 3 places, on both listeners; its 4th is closed.
	preauth := func(want float64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for metric(t, n, "inboxd_gateway_preauth_connections") != want {
			if time.Now().After(deadline) {
				t.Fatalf("%v connections before hello, want %v", metric(t, n, "inboxd_gateway_preauth_connections"), want)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	idle1 := []*rawTCP{dialRawFrom(t, tcp, "127.0.0.1"), dialRawFrom(t, wsAddr, "127.0.0.1"), dialRawFrom(t, tcp, "127.0.0.1")}
	preauth(3) // accepted and counted
	if c := dialRawFrom(t, tcp, "127.0.0.1"); !closedAtOnce(c.nc) {
		t.Fatal("a 4th idle socket from one address (cap 3) was not closed")
	}
	for i, c := range idle1 {
		if !stillOpen(c.nc, 100*time.Millisecond) {
			t.Fatalf("idle socket %d within the cap was closed", i)
		}
	}

	// Another address logs in; the logged-in connection does not count,
	// so 3 idle sockets still fit there, which fills the total of 6.
	user := dialRawFrom(t, tcp, "127.0.0.2")
	user.helloAs(1, "phone", "desktop")
	idle2 := []*rawTCP{dialRawFrom(t, tcp, "127.0.0.2"), dialRawFrom(t, tcp, "127.0.0.2"), dialRawFrom(t, wsAddr, "127.0.0.2")}
	preauth(6)
	for i, c := range idle2 {
		if !stillOpen(c.nc, 100*time.Millisecond) {
			t.Fatalf("idle socket %d from a second address was closed (the logged-in connection counted)", i)
		}
	}
	if c := dialRawFrom(t, tcp, "127.0.0.3"); !closedAtOnce(c.nc) {
		t.Fatal("an idle socket over the total cap (6) was not closed")
	}
	// The logged-in connection works.
	user.write(&pb.Ping{Nonce: 9})
	for {
		m := user.read()
		if m == nil {
			t.Fatal("the logged-in connection closed")
		}
		if p, ok := m.(*pb.Pong); ok && p.GetNonce() == 9 {
			break
		}
	}

	// Once idle sockets go, a login gets in again.
	for _, c := range idle1 {
		c.nc.Close()
	}
	preauth(3) // closed idle sockets no longer count
	dialRawFrom(t, tcp, "127.0.0.3").helloAs(2, "phone", "desktop")

	if metric(t, n, `inboxd_gateway_preauth_refused_total{cap="per_ip"}`) < 1 || metric(t, n, `inboxd_gateway_preauth_refused_total{cap="total"}`) < 1 {
		t.Fatal("refused sockets were not counted by cap")
	}
}
