package e2e

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/client"
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/node"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// jsonWS speaks the JSON form over WebSocket text frames, as a debugging
// tool would.
type jsonWS struct {
	t  *testing.T
	nc net.Conn
}

func dialJSON(t *testing.T, n *node.Node, uid int64, device string) (*jsonWS, *pb.Welcome) {
	t.Helper()
	nc, _, _, err := ws.Dial(context.Background(), n.Gateway.WSURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &jsonWS{t: t, nc: nc}
	c.write(&pb.Hello{Token: testenv.Token(t, uid, device), DeviceKind: "web"})
	w, ok := c.read().(*pb.Welcome)
	if !ok {
		t.Fatal("no welcome")
	}
	return c, w
}

func (c *jsonWS) write(m proto.Message) {
	c.t.Helper()
	b, err := wire.MarshalJSONFrame(m)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := wsutil.WriteClientText(c.nc, b); err != nil {
		c.t.Fatal(err)
	}
}

// read returns the next frame's message (nil when the connection closed).
func (c *jsonWS) read() proto.Message {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	b, op, err := wsutil.ReadServerData(c.nc)
	if err != nil {
		return nil
	}
	if op != ws.OpText {
		c.t.Fatalf("a JSON client got a %v frame", op)
	}
	_, m, err := wire.UnmarshalJSONFrame(b)
	if err != nil {
		c.t.Fatalf("%s: %v", b, err)
	}
	return m
}

// backfillEvents reads backfill batches (confirming each) until one ends
// the backfill, and returns the events they held; it fails on a message
// that is neither a message (msg_id set) nor an event.
func (c *jsonWS) backfillEvents() []*pb.Event {
	c.t.Helper()
	var evs []*pb.Event
	for {
		m := c.read()
		if m == nil {
			c.t.Fatal("connection closed during the backfill")
		}
		b, ok := m.(*pb.Batch)
		if !ok || b.GetLane() != pb.Lane_BACKFILL {
			continue
		}
		for _, msg := range b.GetMessages() {
			switch {
			case msg.GetEvent() != nil:
				evs = append(evs, msg.GetEvent())
			case msg.GetMsgId() == 0:
				c.t.Fatalf("backfill message seq %d has neither msg_id nor event: %v", msg.GetSeq(), msg)
			}
		}
		if b.GetBatchId() != 0 {
			c.write(&pb.Ack{BatchIds: []uint64{b.GetBatchId()}})
		}
		if !b.GetHasMore() {
			return evs
		}
	}
}

// allInOneNode is testnode.AllInOne with its configuration.
func allInOneNode(t *testing.T) (*node.Node, config.Config) {
	t.Helper()
	cfg := testnode.Config(t, testenv.Database(t))
	return testnode.StartNode(t, cfg, config.RoleEmbeddedNATS|config.RoleGateway|config.RoleFanout|config.RoleSyncer), cfg
}

// waitEvents waits until uid's inbox holds at least want events.
func waitEvents(t *testing.T, n *node.Node, l streams.Layout, uid int64, want int) []testenv.Entry {
	t.Helper()
	nc := testnode.Admin(t, n)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var evs []testenv.Entry
		for _, e := range testenv.InboxEntries(t, nc, l, uid) {
			if e.IsEvent() {
				evs = append(evs, e)
			}
		}
		if len(evs) >= want {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("uid %d's inbox holds %d events, want %d", uid, len(evs), want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A JSON (WebSocket text) client that catches up by backfill gets its
// read_sync and receipts as events, as a binary client does.
func TestJSONBackfillCarriesEvents(t *testing.T) {
	n, cfg := allInOneNode(t)
	conv := createConv(t, n, false, 1, 2)
	sendN(t, n, 1, conv, 3, "ev")
	other := connectDevice(t, n, 2, "phone", deviceOpts{})
	other.waitFor(3, 20*time.Second)
	if _, err := other.c.Read(ctxT(t, 20*time.Second), conv, 3); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, n, cfg.Layout, 2, 1) // read_sync
	waitEvents(t, n, cfg.Layout, 1, 2) // delivered and read receipts

	for _, tc := range []struct {
		uid  int64
		want []pb.EventType
	}{
		// uid 1 first: its acks confirm its own messages (no receipts),
		// while uid 2's would send uid 1 new ones.
		{1, []pb.EventType{pb.EventType_DELIVERED, pb.EventType_READ}},
		{2, []pb.EventType{pb.EventType_READ_SYNC}},
	} {
		c, _ := dialJSON(t, n, tc.uid, "browser")
		evs := c.backfillEvents()
		// The delivered and the read receipt travel separate paths (the
		// ack's event writer, the read request) and may reach the inbox
		// in either order; each is a position, so order does not matter.
		slices.SortFunc(evs, func(a, b *pb.Event) int { return int(a.GetType()) - int(b.GetType()) })
		if len(evs) != len(tc.want) {
			t.Fatalf("uid %d: backfill events %v, want %v", tc.uid, evs, tc.want)
		}
		for i, ev := range evs {
			if ev.GetType() != tc.want[i] || ev.GetConvId() != conv || ev.GetUpToConvSeq() != 3 {
				t.Fatalf("uid %d: event %d is %v, want %s of conversation %d up to 3", tc.uid, i, ev, tc.want[i], conv)
			}
			if ev.GetType() != pb.EventType_READ_SYNC && ev.GetPeerUid() != 2 {
				t.Fatalf("uid %d: receipt %v names peer %d, want 2", tc.uid, ev, ev.GetPeerUid())
			}
		}
	}
}

// The gateway's NATS link goes dead (a half-open path: nothing flows, no
// one notices) while a device confirms messages and reads them: the
// DELIVERED and READ receipts are retried and reach the sender once the
// link works again, long after a single attempt would have given up.
func TestReceiptsSurviveNATSOutage(t *testing.T) {
	db := testenv.Database(t)
	natsNode := testnode.StartNode(t, testnode.Config(t, db), config.RoleEmbeddedNATS) // one NATS user per service
	natsAddr := strings.TrimPrefix(natsNode.NATS.ClientURL(), "nats://")
	cfg := testnode.Config(t, db)
	cfg.NATSURL = "nats://" + natsAddr
	scfg := cfg
	scfg.HTTPAddr = "127.0.0.1:0"
	syncer := testnode.StartNode(t, scfg, config.RoleSyncer) // first: it creates the streams
	testnode.StartNode(t, cfg, config.RoleFanout)
	proxy := testenv.StartProxy(t, natsAddr)
	gcfg := testnode.Config(t, db)
	gcfg.NATSURL = "nats://" + proxy.Addr()
	gw := testnode.StartNode(t, gcfg, config.RoleGateway)

	conv := createConv(t, syncer, false, 1, 2)
	sender := connectDevice(t, gw, 1, "sender", deviceOpts{})
	r := dialRaw(t, gw.Gateway.TCPAddr())
	r.hello(2)
	sendN(t, gw, 1, conv, 3, "out")
	var batches []uint64
	for got := 0; got < 3; {
		if b, ok := r.read().(*pb.Batch); ok {
			got += len(b.GetMessages())
			if b.GetBatchId() != 0 {
				batches = append(batches, b.GetBatchId())
			}
		}
	}

	proxy.Blackhole(true)
	cut := time.Now()
	r.write(&pb.Ack{BatchIds: batches}) // DELIVERED to uid 1
	r.write(&pb.Read{RequestId: 1, ConvId: conv, UpToConvSeq: 3})
	// The read is committed in Postgres: read_result says so while the
	// events wait for NATS.
	var answer proto.Message
	for answer == nil {
		_ = r.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
		f, err := wire.ReadTCPFrame(r.r, nil, 1<<20)
		if err != nil {
			t.Fatalf("waiting for the read's answer: %v", err)
		}
		_, m, err := wire.Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		switch m.(type) {
		case *pb.ReadResult, *pb.Error:
			answer = m
		}
	}
	// Past the 10 s one attempt used to get.
	time.Sleep(time.Until(cut.Add(12 * time.Second)))
	proxy.Blackhole(false)
	waitConv(t, sender.c, conv, func(c client.Conversation) bool { return c.PeerDelivered == 3 && c.PeerRead == 3 },
		"delivered and read receipts at the sender after the outage")
	if f := metric(t, gw, `inboxd_gateway_event_publish_failures_total{type="DELIVERED"}`); f < 1 {
		t.Fatalf("%v failed DELIVERED publishes counted during the outage", f)
	}
	if res, ok := answer.(*pb.ReadResult); !ok || res.GetReadSeq() != 3 {
		t.Fatalf("the read during the outage was answered %v, want read_result up to 3", answer)
	}
	if g := metric(t, gw, `inboxd_gateway_events_given_up_total{type="DELIVERED"}`); g != 0 {
		t.Fatalf("%v DELIVERED receipts given up", g)
	}
}

// Each device of the receiver that confirms messages of a direct
// conversation sends the sender its own DELIVERED receipt
// (docs/protocol.md): a second device confirming the same messages is not
// deduplicated away as if it were the first.
func TestDeliveredReceiptPerDevice(t *testing.T) {
	n, cfg := allInOneNode(t)
	conv := createConv(t, n, false, 1, 2)
	sendN(t, n, 1, conv, 5, "dl")
	for i, dev := range []string{"phone", "laptop"} {
		d := connectDevice(t, n, 2, dev, deviceOpts{})
		d.waitFor(5, 20*time.Second)
		evs := waitEvents(t, n, cfg.Layout, 1, i+1)
		time.Sleep(300 * time.Millisecond) // nothing more comes
		if evs = waitEvents(t, n, cfg.Layout, 1, i+1); len(evs) != i+1 {
			t.Fatalf("after %s confirmed: %d receipts at the sender, want %d", dev, len(evs), i+1)
		}
		for _, e := range evs {
			if e.EventType != pb.EventType_DELIVERED || e.ConvID != conv || e.ConvSeq != 5 || e.EventPeer != 2 {
				t.Fatalf("receipt %+v, want DELIVERED of conversation %d up to 5 by uid 2", e.Entry, conv)
			}
		}
	}
}
