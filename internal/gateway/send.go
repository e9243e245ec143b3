package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// sendKey is a send's identity: the sender and its client_msg_id.
type sendKey struct {
	uid  int64
	cmid string
}

// waiter is a send awaiting its result, with the connections to tell.
type waiter struct {
	conns    []*Conn
	deadline time.Time
	// duplicate: JetStream reported the SEND publish as a duplicate, so the
	// original's result may go to another gateway; poll Postgres for it.
	duplicate bool
	nextPoll  time.Time
	since     time.Time // the first submit: inboxd_gateway_send_stored_seconds
}

// sendTracker publishes sends to the SEND stream and routes their results
// back to the connections that asked.
type sendTracker struct {
	g       *Gateway
	mu      sync.Mutex
	waiting map[sendKey]*waiter
}

func newSendTracker(g *Gateway) *sendTracker {
	return &sendTracker{g: g, waiting: make(map[sendKey]*waiter)}
}

// resultSubject is where the fanout answers sends of uid accepted here.
func (t *sendTracker) resultSubject(uid int64) string {
	return t.g.resultPrefix + strconv.FormatInt(uid, 10)
}

func failed(cmid string, code pb.ErrorCode, msg string) *pb.SendResult {
	return &pb.SendResult{ClientMsgId: cmid, Status: pb.SendStatus_FAILED, Code: code, Message: msg}
}

func rejected(cmid string, code pb.ErrorCode, msg string) *pb.SendResult {
	return &pb.SendResult{ClientMsgId: cmid, Status: pb.SendStatus_REJECTED, Code: code, Message: msg}
}

// submit publishes a send. Its result reaches c as a SendResult frame: from
// the fanout (STORED or REJECTED), or FAILED when the send could not be
// accepted, in which case the client retries with the same client_msg_id.
func (t *sendTracker) submit(c *Conn, s *pb.Send) {
	cmid := s.GetClientMsgId()
	// The limits are the protocol's (wire.CheckSend); the fanout applies
	// the same check to the record again.
	var bad *wire.Error
	if errors.As(wire.CheckSend(s), &bad) {
		c.enqueue(outItem{msg: rejected(cmid, bad.Code, bad.Message)})
		return
	}
	if int(c.inflight.Load()) >= t.g.opts.MaxInflightSends {
		c.enqueue(outItem{msg: failed(cmid, pb.ErrorCode_RATE_LIMITED,
			"too many sends awaiting a result on this connection; wait for results and retry")})
		return
	}
	if res := t.admit(c.id.UID, s); res != nil {
		c.enqueue(outItem{msg: res})
		return
	}
	rec := &pb.SendRecord{
		SenderUid:    c.id.UID,
		SenderDevice: c.id.Device,
		ClientMsgId:  cmid,
		ConvId:       s.GetConvId(),
		Kind:         max(s.GetKind(), 1),
		Text:         s.GetText(),
		ReceivedAtMs: time.Now().UnixMilli(),
	}
	data, err := proto.Marshal(rec)
	if err != nil {
		c.enqueue(outItem{msg: failed(cmid, pb.ErrorCode_INTERNAL, err.Error())})
		return
	}
	key := sendKey{c.id.UID, cmid}
	t.wait(key, c)
	msg := &nats.Msg{
		Subject: streams.SendSubject(ids.Partition(s.GetConvId(), t.g.opts.Layout.SendPartitions), s.GetConvId()),
		Data:    data,
		Header: nats.Header{
			// The dedupe id of a send: a retry within the window is absorbed
			// by JetStream; after it, by Postgres (sender, client_msg_id).
			jetstream.MsgIDHeader: {strconv.FormatInt(c.id.UID, 10) + ":" + cmid},
			streams.HeaderReply:   {t.resultSubject(c.id.UID)},
		},
	}
	if _, err := t.g.js.PublishMsgAsync(msg); err != nil {
		t.resolve(key, failed(cmid, pb.ErrorCode_UNAVAILABLE, "send log unavailable: "+err.Error()))
	}
}

// admit applies the user's send buckets: one send of the send rate, and
// as many inbox entries as the conversation has members (capped at the
// entry bucket's size, so that any send can pass from a full bucket). It
// returns the FAILED answer of a refused send, nil for one that may go;
// a refused send takes nothing from either bucket.
func (t *sendTracker) admit(uid int64, s *pb.Send) *pb.SendResult {
	cmid := s.GetClientMsgId()
	u := t.g.limits.users.of(uid)
	now := time.Now()
	sendTok, wait := reserve(u.sends, now, 1)
	if sendTok == nil {
		return t.rateLimited("sends", failed(cmid, pb.ErrorCode_RATE_LIMITED,
			fmt.Sprintf("too many sends per second for this user (--send-rate %g); retry in %s", float64(u.sends.Limit()), wait.Round(time.Millisecond))))
	}
	// On a cache miss this asks Postgres (once per conversation and
	// memberCountTTL on this gateway).
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	members, err := t.g.limits.sizes.members(ctx, s.GetConvId())
	cancel()
	if err != nil {
		sendTok.CancelAt(now)
		return failed(cmid, pb.ErrorCode_UNAVAILABLE, "cannot price the send now; retry")
	}
	cost := min(max(members, 1), u.entries.Burst())
	if tok, wait := reserve(u.entries, now, cost); tok == nil {
		sendTok.CancelAt(now)
		return t.rateLimited("send_entries", failed(cmid, pb.ErrorCode_RATE_LIMITED,
			fmt.Sprintf("this send writes %d inbox entries (one per member) and the user's sends may write %g a second (--send-entry-rate); retry in %s",
				cost, float64(u.entries.Limit()), wait.Round(time.Millisecond))))
	}
	return nil
}

// rateLimited counts a send refused by the bucket limit and returns res.
func (t *sendTracker) rateLimited(limit string, res *pb.SendResult) *pb.SendResult {
	t.g.metrics.sendResults.WithLabelValues("RATE_LIMITED").Inc()
	t.g.metrics.rateLimited.WithLabelValues(limit).Inc()
	return res
}

func (t *sendTracker) wait(key sendKey, c *Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.waiting[key]
	if w == nil {
		w = &waiter{since: time.Now()}
		t.waiting[key] = w
	}
	w.conns = append(w.conns, c)
	w.deadline = time.Now().Add(t.g.opts.SendTimeout)
	c.inflight.Add(1)
}

// resolve delivers a result to every connection waiting for key.
func (t *sendTracker) resolve(key sendKey, res *pb.SendResult) {
	t.mu.Lock()
	w := t.waiting[key]
	delete(t.waiting, key)
	t.mu.Unlock()
	if w == nil {
		return
	}
	t.g.metrics.sendResults.WithLabelValues(res.GetStatus().String()).Inc()
	if res.GetStatus() == pb.SendStatus_STORED {
		d := time.Since(w.since)
		t.g.metrics.sendStored.Observe(d.Seconds())
		t.g.steer.observe(sigSend, d)
	}
	for _, c := range w.conns {
		c.inflight.Add(-1)
		c.enqueue(outItem{msg: res})
	}
}

// keyOf recovers a send's key from its SEND message.
func keyOf(m *nats.Msg) (sendKey, bool) {
	id := m.Header.Get(jetstream.MsgIDHeader)
	if id == "" {
		id = m.Header.Get(streams.HeaderSendKey)
	}
	uidStr, cmid, ok := strings.Cut(id, ":")
	if !ok {
		return sendKey{}, false
	}
	uid, err := strconv.ParseInt(uidStr, 10, 64)
	return sendKey{uid, cmid}, err == nil
}

// onPubAck runs on the JetStream ack goroutine and must not block.
func (t *sendTracker) onPubAck(_ jetstream.JetStream, m *nats.Msg, ack *jetstream.PubAck) {
	if !ack.Duplicate {
		return // the fanout will answer
	}
	key, ok := keyOf(m)
	if !ok {
		return
	}
	t.g.metrics.duplicateSends.Inc()
	t.mu.Lock()
	if w := t.waiting[key]; w != nil {
		w.duplicate = true
		w.nextPoll = time.Time{}
	}
	t.mu.Unlock()
}

// onPubErr runs on the JetStream ack goroutine and must not block.
func (t *sendTracker) onPubErr(_ jetstream.JetStream, m *nats.Msg, err error) {
	key, ok := keyOf(m)
	if !ok {
		return
	}
	var api *jetstream.APIError
	if errors.As(err, &api) && api.ErrorCode == streams.ErrCodeMsgIDInProcess && m.Header.Get(jetstream.MsgIDHeader) != "" {
		// A clustered SEND keeps the id of a proposal its leader lost
		// (every node's power cut) as "in process" for its whole duplicate
		// window (2 minutes), refusing every retry of the send meanwhile.
		// It goes again without the id: the fanout recognises a repeat by
		// (sender, client_msg_id) in Postgres all the same.
		r := nats.NewMsg(m.Subject)
		r.Data = m.Data
		r.Header.Set(streams.HeaderReply, m.Header.Get(streams.HeaderReply))
		r.Header.Set(streams.HeaderSendKey, m.Header.Get(jetstream.MsgIDHeader))
		t.g.metrics.sendsWithoutID.Inc()
		go func() { // not on the ack goroutine: a publish may wait for room
			if _, err := t.g.js.PublishMsgAsync(r); err != nil {
				t.resolve(key, failed(key.cmid, pb.ErrorCode_UNAVAILABLE, "send log unavailable: "+err.Error()))
			}
		}()
		return
	}
	t.resolve(key, failed(key.cmid, pb.ErrorCode_UNAVAILABLE, "send log did not acknowledge: "+err.Error()))
}

// onResult handles a fanout answer on <resultPrefix><uid>.
func (t *sendTracker) onResult(m *nats.Msg) {
	uid, err := strconv.ParseInt(m.Subject[len(t.g.resultPrefix):], 10, 64)
	if err != nil {
		return
	}
	res := new(pb.SendResult)
	if err := proto.Unmarshal(m.Data, res); err != nil {
		t.g.log.Warn("undecodable send result", zap.String("subject", m.Subject), zap.Error(err))
		return
	}
	t.resolve(sendKey{uid, res.GetClientMsgId()}, res)
}

// sweep expires waiters past their deadline and polls Postgres for sends
// that JetStream reported as duplicates (their original's answer may have
// gone to another gateway, or long ago).
func (t *sendTracker) sweep(ctx context.Context, now time.Time) {
	var expired, poll []sendKey
	t.mu.Lock()
	for k, w := range t.waiting {
		switch {
		case now.After(w.deadline):
			expired = append(expired, k)
		case w.duplicate && !now.Before(w.nextPoll):
			w.nextPoll = now.Add(500 * time.Millisecond)
			poll = append(poll, k)
		}
	}
	t.mu.Unlock()
	for _, k := range expired {
		t.resolve(k, failed(k.cmid, pb.ErrorCode_TIMEOUT, "no result in time; retry with the same client_msg_id"))
	}
	if len(poll) == 0 {
		return
	}
	keys := make([]store.SendKey, len(poll))
	for i, k := range poll {
		keys[i] = store.SendKey{Sender: k.uid, ClientMsgID: k.cmid}
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lk, err := t.g.sst.LookupSends(qctx, keys)
	if err != nil {
		t.g.log.Warn("look up duplicate sends", zap.Error(err))
		return
	}
	for i, k := range poll {
		if m, ok := lk.Stored[keys[i]]; ok && m.FannedOut {
			t.resolve(k, &pb.SendResult{ClientMsgId: k.cmid, MsgId: m.MsgID, ConvSeq: m.ConvSeq, Status: pb.SendStatus_STORED})
		} else if r, ok := lk.Rejected[keys[i]]; ok {
			t.resolve(k, rejected(k.cmid, pb.ErrorCode(r.Code), r.Message))
		}
		// Otherwise the original is still being fanned out: keep waiting.
	}
}

func (t *sendTracker) run(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			t.sweep(ctx, now)
		}
	}
}

// forget drops c from every waiter (it closed); results still resolve for
// other connections of the same send.
func (t *sendTracker) forget(c *Conn) {
	if c.inflight.Load() == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, w := range t.waiting {
		for i, wc := range w.conns {
			if wc == c {
				w.conns = append(w.conns[:i], w.conns[i+1:]...)
				break
			}
		}
		if len(w.conns) == 0 {
			delete(t.waiting, k)
		}
	}
}
