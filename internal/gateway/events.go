package gateway

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// Per-user events (read_sync, receipts) are inbox entries like messages:
// they take the same ordered path and cursor, so an offline device catches
// up on them in order, and the archive keeps them.

var eventKinds = map[pb.EventType]string{
	pb.EventType_READ_SYNC: "read_sync",
	pb.EventType_DELIVERED: "receipt",
	pb.EventType_READ:      "receipt",
}

// publishEvent writes ev into uid's inbox (deduplicated by dedupeID within
// the stream's window), then announces it on uid's live subject.
func (g *Gateway) publishEvent(ctx context.Context, uid int64, ev *pb.Event, dedupeID string) error {
	p := ids.Partition(uid, g.opts.Layout.InboxPartitions)
	payload, err := proto.Marshal(&pb.InboxEntry{ConvId: ev.GetConvId(), CreatedAtMs: time.Now().UnixMilli(), Event: ev})
	if err != nil {
		return err
	}
	m := &nats.Msg{
		Subject: streams.InboxSubject(p, uid),
		Data:    payload,
		Header: nats.Header{
			jetstream.MsgIDHeader: {dedupeID},
			streams.HeaderConv:    {strconv.FormatInt(ev.GetConvId(), 10)},
			streams.HeaderKind:    {eventKinds[ev.GetType()]},
		},
	}
	ack, err := g.js.PublishMsg(ctx, m)
	if err != nil {
		return err
	}
	live := wire.AppendMessage(nil, &wire.Message{Seq: ack.Sequence, ConvID: ev.GetConvId(),
		EventType: uint32(ev.GetType()), EventUpTo: ev.GetUpToConvSeq(), EventPeer: ev.GetPeerUid()})
	_ = g.nc.Publish(streams.UserLive(p, uid), live)
	g.metrics.events.WithLabelValues(ev.GetType().String()).Inc()
	return nil
}

// convKinds caches conversation kinds (they never change).
type convKinds struct {
	g *Gateway
	m sync.Map // int64 → int
}

func (k *convKinds) direct(ctx context.Context, convs []int64) map[int64]bool {
	out := map[int64]bool{}
	var missing []int64
	for _, c := range convs {
		if v, ok := k.m.Load(c); ok {
			out[c] = v.(int) == store.KindDirect
		} else {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		got, err := k.g.st.ConvKinds(ctx, missing)
		if err != nil {
			k.g.log.Warn("conversation kinds", zap.Error(err))
		}
		for c, kind := range got {
			k.m.Store(c, kind)
			out[c] = kind == store.KindDirect
		}
	}
	return out
}

// confirmed is a message a device just confirmed.
type confirmed struct {
	conv, convSeq, sender int64
}

// deliveredReceipts tells the senders of direct-conversation messages that
// uid's device stored them: one DELIVERED event per conversation and
// confirmation, with the highest conv_seq confirmed.
func (g *Gateway) deliveredReceipts(uid int64, msgs []confirmed) {
	top := map[int64]confirmed{}
	for _, m := range msgs {
		if m.sender == uid {
			continue
		}
		if t, ok := top[m.conv]; !ok || m.convSeq > t.convSeq {
			top[m.conv] = m
		}
	}
	if len(top) == 0 {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		convs := make([]int64, 0, len(top))
		for c := range top {
			convs = append(convs, c)
		}
		direct := g.kinds.direct(ctx, convs)
		for c, m := range top {
			if !direct[c] {
				continue
			}
			ev := &pb.Event{Type: pb.EventType_DELIVERED, ConvId: c, UpToConvSeq: m.convSeq, PeerUid: uid}
			id := "dlv:" + strconv.FormatInt(c, 10) + ":" + strconv.FormatInt(uid, 10) + ":" + strconv.FormatInt(m.convSeq, 10)
			if err := g.publishEvent(ctx, m.sender, ev, id); err != nil {
				g.log.Debug("delivered receipt", zap.Int64("conv_id", c), zap.Error(err))
			}
		}
	}()
}
