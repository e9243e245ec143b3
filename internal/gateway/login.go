package gateway

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// hello reads and checks the first frame. It reports whether the session
// may go on.
func (c *Conn) hello() bool {
	_ = c.nc.SetReadDeadline(time.Now().Add(c.g.opts.HelloTimeout))
	frame, text, err := c.tr.readFrame()
	if err != nil {
		c.readFailed(err, false)
		return false
	}
	c.json = text
	t, m, err := decode(frame, text)
	if err != nil {
		c.fail(err, true)
		return false
	}
	h, ok := m.(*pb.Hello)
	if !ok {
		c.fail(wire.Errorf(pb.ErrorCode_UNAUTHENTICATED, "the first frame must be hello, got %s", t), true)
		return false
	}
	id, err := c.g.verifier.Verify(h.GetToken())
	if err != nil {
		c.g.metrics.authFailures.Inc()
		c.fail(wire.Errorf(pb.ErrorCode_UNAUTHENTICATED, "%v", err), true)
		return false
	}
	switch h.GetDeviceKind() {
	case "", "mobile", "desktop", "web":
	default:
		c.fail(wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "device_kind %q: want mobile, desktop or web", h.GetDeviceKind()), true)
		return false
	}
	c.id, c.kind = id, h.GetDeviceKind()
	if c.kind == "" {
		c.kind = "desktop"
	}
	// The summary (a Postgres read by uid) does not depend on the session:
	// read it while the session opens.
	type summaryResult struct {
		s   *pb.Summary
		err error
	}
	summaryCh := make(chan summaryResult, 1)
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sm, err := c.summary(sctx, 0)
		summaryCh <- summaryResult{sm, err}
	}()
	sess, pending, err := c.g.startSession(context.Background(), c)
	if errors.Is(err, errTooManyConns) {
		c.fail(wire.Errorf(pb.ErrorCode_LIMIT_EXCEEDED, "user %d already holds %d connections on this gateway", id.UID, c.g.opts.MaxConnsPerUser), true)
		return false
	}
	if err != nil {
		c.logger().Warn("open device session", zap.Error(err))
		c.fail(wire.Errorf(pb.ErrorCode_UNAVAILABLE, "cannot open the device's inbox now; retry"), true)
		return false
	}
	cursor := sess.State().Cursor
	sr := <-summaryCh
	summary, err := sr.s, sr.err
	if err != nil {
		// Fail loudly: an empty summary would tell the device it has
		// nothing unread. The login depends on Postgres anyway (the cursor
		// mirror); the client reconnects with backoff.
		sess.close()
		c.logger().Warn("login summary", zap.Error(err))
		c.fail(wire.Errorf(pb.ErrorCode_UNAVAILABLE, "cannot read the login summary now; retry"), true)
		return false
	}
	c.g.metrics.handshakes.Inc()
	summary.Pending = pending
	tooLong := pending > uint64(c.g.opts.OfflineThreshold)
	// The welcome is the first frame; live entries that arrived meanwhile
	// and the backfill follow it (start).
	ok = c.enqueue(outItem{msg: &pb.Welcome{
		Uid:              id.UID,
		Device:           id.Device,
		Cursor:           cursor,
		Epoch:            c.g.epoch,
		HeartbeatMs:      uint32(c.g.opts.Heartbeat / time.Millisecond),
		MaxFrame:         uint32(c.g.opts.MaxFrame),
		Server:           "inboxd/" + c.g.opts.ID,
		Pending:          pending,
		PageSize:         uint32(sess.prof.pageSize),
		MaxInflightSends: uint32(c.g.opts.MaxInflightSends),
		Summary:          summary,
		OfflineTooLong:   tooLong,
	}})
	if c.isClosed() {
		sess.close() // closed while the session opened
		return false
	}
	if tooLong {
		nctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := sess.sendNewest(nctx); err != nil {
			c.logger().Warn("newest page", zap.Error(err)) // the drain still delivers everything
		}
		cancel()
	}
	sess.start()
	return ok
}

// summary reads a page of the user's login summary: the first (before 0)
// or the one after the conversation whose last message is before.
func (c *Conn) summary(ctx context.Context, before int64) (*pb.Summary, error) {
	rows, more, err := c.g.st.Summary(ctx, c.id.UID, before, store.SummaryLimit)
	if err != nil {
		return nil, err
	}
	s := &pb.Summary{HasMore: more}
	for _, r := range rows {
		s.Convs = append(s.Convs, &pb.ConvSummary{ConvId: r.ConvID, Unread: r.Unread, LastSeq: r.LastSeq, ReadSeq: r.ReadSeq,
			LastMsgId: r.LastMsgID, LastSenderUid: r.LastSenderUID, LastPreview: r.LastPreview, LastAtMs: r.LastAt.UnixMilli()})
	}
	if more {
		s.NextBeforeMsgId = rows[len(rows)-1].LastMsgID
	}
	return s, nil
}
