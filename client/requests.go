package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// request sends m (whose request_id is set by build) on the current session
// and waits for the answer carrying that id.
func (c *Client) request(ctx context.Context, build func(id uint64) proto.Message) (proto.Message, error) {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	return c.requestOn(ctx, s, build)
}

// requestOn is request on session s (nil: not connected).
func (c *Client) requestOn(ctx context.Context, s *session, build func(id uint64) proto.Message) (proto.Message, error) {
	c.mu.Lock()
	c.nextReq++
	id := c.nextReq
	ch := make(chan proto.Message, 1)
	if c.reqs == nil {
		c.reqs = map[uint64]chan proto.Message{}
	}
	c.reqs[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.reqs, id)
		c.mu.Unlock()
	}()
	if s == nil {
		return nil, c.notConnected()
	}
	if err := s.write(build(id)); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		return answered(m)
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-s.done:
		select {
		case m := <-ch: // answered before the connection was lost
			return answered(m)
		default:
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			return nil, c.stopErrLocked()
		}
		return nil, errors.New("client: connection lost before the answer")
	}
}

// answered is a request's result from its answer: an error frame is the
// request's error.
func answered(m proto.Message) (proto.Message, error) {
	if e, ok := m.(*pb.Error); ok {
		return nil, wire.FromProto(e)
	}
	return m, nil
}

// notConnected is the error of a call made between sessions: the reason
// the client stopped if it did (ErrClosed, ErrReplaced), else a transient
// one.
func (c *Client) notConnected() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.stopErrLocked()
	}
	return errors.New("client: not connected")
}

// answer routes a response to its request; it reports whether one waited.
func (c *Client) answer(id uint64, m proto.Message) bool {
	c.mu.Lock()
	ch := c.reqs[id]
	c.mu.Unlock()
	if ch == nil {
		return false
	}
	select {
	case ch <- m:
	default:
	}
	return true
}

// Pull reads a conversation's timeline: up to limit (≤ 50) messages after
// afterConvSeq, or, with beforeConvSeq > 0, the last ones before it; always
// in ascending conv_seq. hasMore says more remain in that direction. Pulls
// are rate limited per user (RATE_LIMITED carries the wait).
func (c *Client) Pull(ctx context.Context, convID, afterConvSeq, beforeConvSeq int64, limit int) ([]Message, bool, error) {
	p, err := c.PullPage(ctx, convID, afterConvSeq, beforeConvSeq, limit)
	return p.Messages, p.HasMore, err
}

// PullPage is a page of a conversation's timeline.
type PullPage struct {
	Messages []Message // ascending conv_seq
	HasMore  bool      // more remain in the pull's direction
	// ExpiredUpTo: the server's retention removed the conversation's
	// messages up to this conv_seq (0: none); none of them is among
	// Messages, and none will ever come.
	ExpiredUpTo int64
}

// PullPage is Pull with the conversation's retention horizon.
func (c *Client) PullPage(ctx context.Context, convID, afterConvSeq, beforeConvSeq int64, limit int) (PullPage, error) {
	m, err := c.request(ctx, func(id uint64) proto.Message {
		return &pb.Pull{RequestId: id, ConvId: convID, AfterConvSeq: afterConvSeq, BeforeConvSeq: beforeConvSeq, Limit: uint32(limit)}
	})
	if err != nil {
		return PullPage{}, err
	}
	r, ok := m.(*pb.PullResult)
	if !ok {
		return PullPage{}, fmt.Errorf("client: pull answered with %T", m)
	}
	p := PullPage{Messages: make([]Message, 0, len(r.GetMessages())), HasMore: r.GetHasMore(), ExpiredUpTo: r.GetExpiredUpToConvSeq()}
	for _, pm := range r.GetMessages() {
		p.Messages = append(p.Messages, fromProto(pm, "pull"))
	}
	if p.ExpiredUpTo > 0 {
		c.applyExpired(convID, p.ExpiredUpTo)
	}
	return p, nil
}

// Read marks the conversation read up to upToConvSeq on every device of the
// user (and, in a direct conversation, tells the peer). It returns the read
// position after the request.
func (c *Client) Read(ctx context.Context, convID, upToConvSeq int64) (int64, error) {
	m, err := c.request(ctx, func(id uint64) proto.Message {
		return &pb.Read{RequestId: id, ConvId: convID, UpToConvSeq: upToConvSeq}
	})
	if err != nil {
		return 0, err
	}
	r, ok := m.(*pb.ReadResult)
	if !ok {
		return 0, fmt.Errorf("client: read answered with %T", m)
	}
	c.applyRead(convID, r.GetReadSeq())
	return r.GetReadSeq(), nil
}

// ReadCount returns how many members of a group read message convSeq, out
// of those who can see it.
func (c *Client) ReadCount(ctx context.Context, convID, convSeq int64) (read, members int64, err error) {
	m, err := c.request(ctx, func(id uint64) proto.Message {
		return &pb.ReadCount{RequestId: id, ConvId: convID, ConvSeq: convSeq}
	})
	if err != nil {
		return 0, 0, err
	}
	r, ok := m.(*pb.ReadCountResult)
	if !ok {
		return 0, 0, fmt.Errorf("client: read count answered with %T", m)
	}
	return r.GetRead(), r.GetMembers(), nil
}

// Summary asks for the login summary again: its first page (the
// conversations with the newest last messages); Summary.has_more says
// more follow (see SummaryPage, SummaryAll).
func (c *Client) Summary(ctx context.Context) (*pb.Summary, error) {
	return c.SummaryPage(ctx, 0)
}

// SummaryPage asks for one page of the summary: the conversations with
// unread messages whose last message is older than beforeMsgID (0: the
// first page). The next page is asked with the answer's
// next_before_msg_id while has_more is set. Conversations() reflects every
// page asked for.
func (c *Client) SummaryPage(ctx context.Context, beforeMsgID int64) (*pb.Summary, error) {
	m, err := c.request(ctx, func(id uint64) proto.Message {
		return &pb.SummaryRequest{RequestId: id, BeforeMsgId: beforeMsgID}
	})
	if err != nil {
		return nil, err
	}
	s, ok := m.(*pb.Summary)
	if !ok {
		return nil, fmt.Errorf("client: summary answered with %T", m)
	}
	c.applySummary(s)
	return s, nil
}

// SummaryAll pages through the whole summary (newest last message first)
// and returns every conversation with unread messages, e.g. after a
// welcome whose summary says has_more.
func (c *Client) SummaryAll(ctx context.Context) ([]*pb.ConvSummary, error) {
	var all []*pb.ConvSummary
	var before int64
	for {
		s, err := c.SummaryPage(ctx, before)
		if err != nil {
			return all, err
		}
		all = append(all, s.GetConvs()...)
		if !s.GetHasMore() {
			return all, nil
		}
		next := s.GetNextBeforeMsgId()
		if next <= 0 || (before != 0 && next >= before) {
			// Pages go to older messages; one that does not would loop.
			return all, fmt.Errorf("client: summary page before %d: has_more with next_before_msg_id %d", before, next)
		}
		before = next
	}
}

// AckRange confirms every entry of the device's inbox up to seq, including
// those not fetched (after an offline-too-long welcome, for instance).
func (c *Client) AckRange(seq uint64) error {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	if s == nil {
		return c.notConnected()
	}
	return s.write(&pb.AckRange{UpToSeq: seq})
}

func fromProto(pm *pb.Message, lane string) Message {
	return Message{Seq: pm.GetSeq(), MsgID: pm.GetMsgId(), ConvID: pm.GetConvId(), ConvSeq: pm.GetConvSeq(),
		SenderUID: pm.GetSenderUid(), Kind: pm.GetKind(), Text: pm.GetText(),
		CreatedAt: time.UnixMilli(pm.GetCreatedAtMs()), Lane: lane}
}
