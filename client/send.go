package client

import (
	"context"
	"time"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// Result is the answer to a stored send.
type Result struct {
	ClientMsgID string
	MsgID       int64
	ConvSeq     int64
}

// Send stores a text message in a conversation and returns once the server
// answered STORED: the body is durable and every member's inbox holds it.
// clientMsgID makes the send idempotent: Send retries it (on reconnects and
// on transient failures) until STORED or REJECTED, and calling Send again
// with the same id returns the original msg_id and conv_seq. A REJECTED send
// returns a *wire.Error with the reason's code. Only ctx ends the retrying.
func (c *Client) Send(ctx context.Context, convID int64, clientMsgID, text string) (Result, error) {
	return c.SendAsync(convID, clientMsgID, text).Wait(ctx)
}

// PendingSend is a send in flight; Wait returns its outcome.
type PendingSend struct {
	c   *Client
	p   *pendingSend
	err error
}

// SendAsync writes a send to the connection before it returns (so sends
// issued one after another reach a conversation in that order) and returns
// without waiting for the answer. Wait must be called: it drives retries.
func (c *Client) SendAsync(convID int64, clientMsgID, text string) *PendingSend {
	req := &pb.Send{ClientMsgId: clientMsgID, ConvId: convID, Kind: 1, Text: text}
	frame, err := wire.AppendFrame(nil, req)
	if err != nil {
		// protobuf refuses invalid UTF-8 in strings; nothing was sent.
		return &PendingSend{err: wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "send %q: %v", clientMsgID, err)}
	}
	p := &pendingSend{req: req, frame: frame, result: make(chan *pb.SendResult, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return &PendingSend{err: ErrClosed}
	}
	if _, dup := c.pending[clientMsgID]; dup {
		c.mu.Unlock()
		return &PendingSend{err: wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "a send with client_msg_id %q is already in flight", clientMsgID)}
	}
	c.nextOrd++
	p.order = c.nextOrd
	c.pending[clientMsgID] = p
	s := c.cur
	c.mu.Unlock()
	if s != nil {
		c.transmit(s, p)
	} // else: up() sends it when the next session starts
	return &PendingSend{c: c, p: p}
}

// Wait returns the send's outcome, retrying transient failures with the
// same client_msg_id until ctx ends.
func (ps *PendingSend) Wait(ctx context.Context) (Result, error) {
	if ps.err != nil {
		return Result{}, ps.err
	}
	c, p := ps.c, ps.p
	cmid := p.req.GetClientMsgId()
	defer func() {
		c.mu.Lock()
		if c.pending[cmid] == p {
			delete(c.pending, cmid)
		}
		c.mu.Unlock()
	}()
	retry := time.Duration(0)
	for {
		var res *pb.SendResult
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case res = <-p.result:
		}
		switch res.GetStatus() {
		case pb.SendStatus_STORED:
			return Result{ClientMsgID: cmid, MsgID: res.GetMsgId(), ConvSeq: res.GetConvSeq()}, nil
		case pb.SendStatus_REJECTED:
			return Result{}, &wire.Error{Code: res.GetCode(), Message: res.GetMessage()}
		}
		if c.ctx.Err() != nil {
			return Result{}, ErrClosed
		}
		// FAILED: transient. Retry with the same id after a growing pause.
		retry = min(max(2*retry, 50*time.Millisecond), 2*time.Second)
		select {
		case <-ctx.Done():
			return Result{}, ctx.Err()
		case <-time.After(retry):
		}
		c.mu.Lock()
		s := c.cur
		c.mu.Unlock()
		if s != nil {
			c.transmit(s, p)
		}
	}
}

func (c *Client) onSendResult(s *session, r *pb.SendResult) {
	c.mu.Lock()
	p := c.pending[r.GetClientMsgId()]
	c.mu.Unlock()
	if p == nil {
		return // an answer to a send already answered (a retry's echo)
	}
	select {
	case p.result <- r:
	default:
	}
}
