package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// Requests other than sends and acks (summary, pull, read, read count) run
// off the reader goroutine, at most maxRequests per connection at a time;
// their answers carry the request's id.
const maxRequests = 4

func (c *Conn) request(id uint64, fn func(ctx context.Context) (proto.Message, error)) {
	if c.reqs.Add(1) > maxRequests {
		c.reqs.Add(-1)
		c.enqueue(outItem{msg: &pb.Error{Code: pb.ErrorCode_RATE_LIMITED, RequestId: id, RetryAfterMs: 100,
			Message: "too many requests in flight on this connection"}})
		return
	}
	go func() {
		defer c.reqs.Add(-1)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := fn(ctx)
		if err != nil {
			c.enqueue(outItem{msg: requestError(id, err)})
			return
		}
		c.enqueue(outItem{msg: resp})
	}()
}

func requestError(id uint64, err error) *pb.Error {
	var we *wire.Error
	switch {
	case errors.As(err, &we):
	case errors.Is(err, store.ErrNotMember):
		we = wire.Errorf(pb.ErrorCode_NOT_MEMBER, "not a member of this conversation")
	case errors.Is(err, store.ErrConvNotFound):
		we = wire.Errorf(pb.ErrorCode_CONV_NOT_FOUND, "no such conversation")
	default:
		we = wire.Errorf(pb.ErrorCode_UNAVAILABLE, "try again later")
	}
	e := we.Proto()
	e.RequestId = id
	return e
}

// limitedPull answers RATE_LIMITED, with the wait, for a pull over the
// user's pull rate.
func (c *Conn) limitedPull() error {
	l := c.g.limits.users.of(c.id.UID).pulls
	if tok, wait := reserve(l, time.Now(), 1); tok == nil {
		c.g.metrics.rateLimited.WithLabelValues("pulls").Inc()
		e := wire.Errorf(pb.ErrorCode_RATE_LIMITED, "too many pulls (--pull-rate %g/s for this user); retry in %s", float64(l.Limit()), wait.Round(time.Millisecond))
		e.RetryAfterMs = limitedFor(wait)
		return e
	}
	return nil
}

// overRequestRate answers a summary_request, read, read_count, ack_range
// or refresh over the user's request rate with RATE_LIMITED (the
// request's id, the wait; not fatal) and reports true: the frame is then
// not acted on. A refused ack_range moves no cursor, so its entries keep
// coming (a repeat later, never a skip); a refused read leaves the read
// position where it was. Other frames are not counted here (sends and
// pulls have their own buckets).
func (c *Conn) overRequestRate(t wire.FrameType, m proto.Message) bool {
	switch t {
	case wire.TypeSummaryRequest, wire.TypeRead, wire.TypeReadCount, wire.TypeAckRange, wire.TypeRefresh:
	default:
		return false
	}
	l := c.g.limits.users.of(c.id.UID).requests
	tok, wait := reserve(l, time.Now(), 1)
	if tok != nil {
		return false
	}
	c.g.metrics.rateLimited.WithLabelValues("requests").Inc()
	e := &pb.Error{Code: pb.ErrorCode_RATE_LIMITED, RetryAfterMs: limitedFor(wait),
		Message: fmt.Sprintf("too many requests (summary_request, read, read_count, ack_range, refresh: --request-rate %g/s for this user); this %s was not acted on; retry in %s",
			float64(l.Limit()), t, wait.Round(time.Millisecond))}
	if r, ok := m.(interface{ GetRequestId() uint64 }); ok {
		e.RequestId = r.GetRequestId()
	}
	c.enqueue(outItem{msg: e})
	return true
}

func (c *Conn) handlePull(p *pb.Pull) {
	c.request(p.GetRequestId(), func(ctx context.Context) (proto.Message, error) {
		if p.GetConvId() <= 0 || p.GetLimit() > store.MaxPull || p.GetAfterConvSeq() < 0 || p.GetBeforeConvSeq() < 0 {
			return nil, wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "pull needs conv_id > 0, limit ≤ %d and non-negative positions", store.MaxPull)
		}
		if err := c.limitedPull(); err != nil {
			return nil, err
		}
		pr, err := c.g.st.Pull(ctx, c.id.UID, p.GetConvId(), p.GetAfterConvSeq(), p.GetBeforeConvSeq(), int(p.GetLimit()))
		if err != nil {
			return nil, err
		}
		res := &pb.PullResult{RequestId: p.GetRequestId(), ConvId: p.GetConvId(), HasMore: pr.HasMore, ExpiredUpToConvSeq: pr.ExpiredUpTo}
		for _, m := range pr.Messages {
			res.Messages = append(res.Messages, &pb.Message{MsgId: m.MsgID, ConvId: m.ConvID, ConvSeq: m.ConvSeq,
				SenderUid: m.SenderUID, Kind: m.Kind, Text: m.Text, CreatedAtMs: m.CreatedAtMs})
		}
		return res, nil
	})
}

func (c *Conn) handleRead(r *pb.Read) {
	c.request(r.GetRequestId(), func(ctx context.Context) (proto.Message, error) {
		if r.GetConvId() <= 0 || r.GetUpToConvSeq() < 0 {
			return nil, wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "read needs conv_id > 0 and up_to_conv_seq ≥ 0")
		}
		uid := c.id.UID
		readSeq, vis, err := c.g.st.MarkRead(ctx, uid, r.GetConvId(), r.GetUpToConvSeq())
		if err != nil {
			return nil, err
		}
		// The position is committed: read_result says so. The events that
		// tell it are durable-effort (events.go): a failed publish is
		// retried in the background, and the next read of the conversation
		// publishes them again for the read_seq in Postgres.
		seq := strconv.FormatInt(readSeq, 10)
		conv := strconv.FormatInt(r.GetConvId(), 10)
		// Every device of the user (this one included) learns the position.
		sync := &event{uid: uid, dedupeID: "rs:" + conv + ":" + strconv.FormatInt(uid, 10) + ":" + seq,
			entry: streams.Entry{ConvID: r.GetConvId(), ConvSeq: readSeq, EventType: pb.EventType_READ_SYNC}}
		syncErr := c.g.events.publishOrRetry(ctx, sync)
		if vis.Kind == store.KindDirect && vis.PeerUID != 0 {
			receipt := &event{uid: vis.PeerUID, dedupeID: "rd:" + conv + ":" + strconv.FormatInt(uid, 10) + ":" + seq,
				entry: streams.Entry{ConvID: r.GetConvId(), ConvSeq: readSeq, EventType: pb.EventType_READ, EventPeer: uid}}
			if syncErr != nil {
				c.g.events.later(receipt) // NATS just failed: do not make the reader wait a second time
			} else {
				_ = c.g.events.publishOrRetry(ctx, receipt)
			}
		}
		return &pb.ReadResult{RequestId: r.GetRequestId(), ConvId: r.GetConvId(), ReadSeq: readSeq}, nil
	})
}

func (c *Conn) handleReadCount(r *pb.ReadCount) {
	c.request(r.GetRequestId(), func(ctx context.Context) (proto.Message, error) {
		if r.GetConvId() <= 0 || r.GetConvSeq() <= 0 {
			return nil, wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "read_count needs conv_id > 0 and conv_seq > 0")
		}
		v, err := c.g.st.Visible(ctx, c.id.UID, r.GetConvId())
		if err != nil {
			return nil, err
		}
		if !seesSeq(v, r.GetConvSeq()) {
			// A removed member learns nothing of what was sent after it
			// left, a member nothing of what was sent before it joined
			// (unless the conversation shares history).
			return nil, wire.Errorf(pb.ErrorCode_NOT_MEMBER, "message %d of conversation %d was not sent to you", r.GetConvSeq(), r.GetConvId())
		}
		read, members, err := c.g.st.ReadCount(ctx, r.GetConvId(), r.GetConvSeq())
		if err != nil {
			return nil, err
		}
		return &pb.ReadCountResult{RequestId: r.GetRequestId(), ConvId: r.GetConvId(), ConvSeq: r.GetConvSeq(), Read: read, Members: members}, nil
	})
}

// seesSeq reports whether a user of visibility v may ask about message seq:
// one of its visible spans holds it, or it is a current member and seq is
// not sent yet (answered 0 of 0 until it is).
func seesSeq(v store.Visibility, seq int64) bool {
	for _, sp := range v.Spans {
		if sp.After < seq && seq <= sp.Until {
			return true
		}
	}
	return v.IsMember && seq > v.UpToSeq
}

func (c *Conn) handleSummaryRequest(r *pb.SummaryRequest) {
	c.request(r.GetRequestId(), func(ctx context.Context) (proto.Message, error) {
		if r.GetBeforeMsgId() < 0 {
			return nil, wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "summary_request needs before_msg_id ≥ 0")
		}
		s, err := c.summary(ctx, r.GetBeforeMsgId())
		if err != nil {
			return nil, err
		}
		s.Pending, s.RequestId = c.session().pending(ctx), r.GetRequestId()
		return s, nil
	})
}
