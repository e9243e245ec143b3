package client

import (
	"context"
	"fmt"
	"slices"
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
// clientMsgID makes the send idempotent: the client retries it (on
// reconnects and on transient failures) until STORED or REJECTED, and
// calling Send again with the same id returns the original msg_id and
// conv_seq. A REJECTED send returns a *wire.Error with the reason's code.
// Only ctx ends the retrying.
func (c *Client) Send(ctx context.Context, convID int64, clientMsgID, text string) (Result, error) {
	return c.SendAsync(convID, clientMsgID, text).Wait(ctx)
}

// PendingSend is a send in flight; Wait returns its outcome.
type PendingSend struct {
	c   *Client
	p   *pendingSend
	err error
}

// SendAsync queues a send and returns at once. Sends go on the wire in the
// order SendAsync was called (so sends to a conversation get conv_seq in that
// order), at most the server's max_inflight_sends at a time; transient
// failures are retried by the client, in the background, with the same
// client_msg_id. A retried send goes after those already on the wire: a
// send answered FAILED may get a conv_seq after later sends (a reconnect
// keeps the order: every unanswered send goes out again in issue order).
func (c *Client) SendAsync(convID int64, clientMsgID, text string) *PendingSend {
	req := &pb.Send{ClientMsgId: clientMsgID, ConvId: convID, Kind: wire.KindText, Text: text}
	// The protocol's limits, checked as the gateway checks them: a send
	// that can never be stored is refused here with the gateway's code and
	// words. Queued, a text above the gateway's max_frame would close the
	// connection instead of getting an answer, and every reconnect would
	// send it again until the waiter gave up.
	if err := wire.CheckSend(req); err != nil {
		return &PendingSend{err: err}
	}
	frame, err := wire.AppendFrame(nil, req)
	if err != nil {
		return &PendingSend{err: wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "send %q: %v", clientMsgID, err)}
	}
	p := &pendingSend{req: req, frame: frame, result: make(chan *pb.SendResult, 1)}
	c.mu.Lock()
	if c.closed {
		err := c.stopErrLocked()
		c.mu.Unlock()
		return &PendingSend{err: err}
	}
	if _, dup := c.pending[clientMsgID]; dup {
		c.mu.Unlock()
		return &PendingSend{err: wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "a send with client_msg_id %q is already in flight", clientMsgID)}
	}
	c.nextOrd++
	p.order = c.nextOrd
	c.pending[clientMsgID] = p
	c.queue = append(c.queue, p)
	p.queued = true
	s := c.cur
	c.mu.Unlock()
	if s != nil {
		c.pump(s)
	} // else: up() sends it when the next session starts
	return &PendingSend{c: c, p: p}
}

// Wait returns the send's outcome. If ctx ends first the send is abandoned
// (it may still have been stored: send again with the same client_msg_id to
// learn its msg_id).
func (ps *PendingSend) Wait(ctx context.Context) (Result, error) {
	if ps.err != nil {
		return Result{}, ps.err
	}
	c, p := ps.c, ps.p
	cmid := p.req.GetClientMsgId()
	select {
	case res := <-p.result:
		switch res.GetStatus() {
		case pb.SendStatus_STORED:
			return Result{ClientMsgID: cmid, MsgID: res.GetMsgId(), ConvSeq: res.GetConvSeq()}, nil
		case pb.SendStatus_REJECTED:
			return Result{}, &wire.Error{Code: res.GetCode(), Message: res.GetMessage()}
		}
		// Failed by the client's stop (failPending): say why it stopped.
		c.mu.Lock()
		defer c.mu.Unlock()
		return Result{}, c.stopErrLocked()
	case <-ctx.Done():
		c.mu.Lock()
		if c.pending[cmid] == p {
			delete(c.pending, cmid)
			if p.queued {
				c.queue = slices.DeleteFunc(c.queue, func(q *pendingSend) bool { return q == p })
				p.queued = false
			}
			if p.onWire {
				// The server counts it until it answers: the slot is freed
				// then (onSendResult), not now.
				c.abandoned[cmid]++
			}
		}
		c.mu.Unlock()
		return Result{}, ctx.Err()
	}
}

// onSendResult handles an answer. Final answers go to the waiter;
// transient failures are retried after a growing pause.
func (c *Client) onSendResult(s *session, r *pb.SendResult) {
	c.mu.Lock()
	p := c.pending[r.GetClientMsgId()]
	if c.cur != s {
		c.mu.Unlock()
		return // from an older session: its sends went out again on this one
	}
	if p == nil || !p.onWire {
		if c.abandoned[r.GetClientMsgId()] > 0 {
			// The answer to an attempt whose waiter gave up: its slot is free.
			c.abandoned[r.GetClientMsgId()]--
			c.inflight--
			c.mu.Unlock()
			c.pump(s)
			return
		}
		c.mu.Unlock()
		return // an answer to a send answered before
	}
	p.onWire = false
	c.inflight--
	if r.GetStatus() == pb.SendStatus_STORED || r.GetStatus() == pb.SendStatus_REJECTED {
		delete(c.pending, r.GetClientMsgId())
		p.result <- r
	} else {
		p.attempts++
		wait := min(time.Duration(1<<min(p.attempts, 6))*25*time.Millisecond, 2*time.Second)
		time.AfterFunc(wait, func() {
			c.mu.Lock()
			c.requeueLocked(p)
			cur := c.cur
			c.mu.Unlock()
			if cur != nil {
				c.pump(cur)
			}
		})
	}
	c.mu.Unlock()
	c.pump(s)
}

// fitsLocked reports whether p's frame is within the max_frame s's welcome
// advertises (0: not advertised). One that is not is rejected with
// FRAME_TOO_LARGE instead of going on the wire, where the server would
// close the connection for it.
func (c *Client) fitsLocked(s *session, p *pendingSend) bool {
	limit := int(s.welcome.GetMaxFrame())
	if limit <= 0 || len(p.frame) <= limit {
		return true
	}
	c.rejectLocked(p, pb.ErrorCode_FRAME_TOO_LARGE,
		fmt.Sprintf("the send's frame of %d bytes exceeds the server's max_frame of %d", len(p.frame), limit))
	return false
}

// onFrameTooLarge handles a session the server ends with FRAME_TOO_LARGE
// although the welcome did not advertise a limit the frame exceeds (an
// older server, a limit lower than advertised). The largest send on the
// wire is the frame it refused (every other frame the client writes is
// small) and is rejected with the server's code and words: sent again on
// the next session it would end that one too, and every one after it,
// until its waiter gave up.
func (c *Client) onFrameTooLarge(s *session, werr *wire.Error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur != s {
		return
	}
	var culprit *pendingSend
	for _, p := range c.pending {
		if p.onWire && (culprit == nil || len(p.frame) > len(culprit.frame)) {
			culprit = p
		}
	}
	if culprit == nil {
		return
	}
	culprit.onWire = false
	c.inflight--
	c.rejectLocked(culprit, werr.Code, fmt.Sprintf("the send's frame of %d bytes: %s", len(culprit.frame), werr.Message))
}

// rejectLocked ends p with a final REJECTED answer of the client's own
// (p is neither queued nor on the wire).
func (c *Client) rejectLocked(p *pendingSend, code pb.ErrorCode, msg string) {
	cmid := p.req.GetClientMsgId()
	delete(c.pending, cmid)
	p.result <- &pb.SendResult{ClientMsgId: cmid, Status: pb.SendStatus_REJECTED, Code: code, Message: msg}
}
