package fanout

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
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

// delivery is a message and the members who get an inbox entry of it.
type delivery struct {
	m  *store.Message
	to []int64 // ascending
}

// send is one SEND message of a batch.
type send struct {
	msg    jetstream.Msg
	rec    *pb.SendRecord // nil when the message could not be decoded
	reply  string
	key    store.SendKey
	result *pb.SendResult
}

// validate returns why rec can never be stored, or nil if it may be. The
// SEND stream is not trusted blindly (an older gateway or a hand-written
// record may break the limits): a record gets the gateway's own check,
// wire.CheckSend, with its codes and words, and a sender check (the gateway
// takes the sender from the token).
func validate(rec *pb.SendRecord) *wire.Error {
	if rec.GetSenderUid() <= 0 {
		return wire.Errorf(pb.ErrorCode_INVALID_ARGUMENT, "sender_uid must be positive")
	}
	var bad *wire.Error
	if errors.As(wire.CheckSend(rec), &bad) {
		return bad
	}
	return nil
}

func stored(m *store.Message) *pb.SendResult {
	return &pb.SendResult{ClientMsgId: m.ClientMsgID, MsgId: m.MsgID, ConvSeq: m.ConvSeq, Status: pb.SendStatus_STORED}
}

func rejected(cmid string, code pb.ErrorCode, text string) *pb.SendResult {
	return &pb.SendResult{ClientMsgId: cmid, Status: pb.SendStatus_REJECTED, Code: code, Message: text}
}

// process runs one batch to completion: decide and commit in one Postgres
// transaction, publish the inbox entries, then acknowledge and answer. Any
// error leaves the batch unacknowledged; running it again is safe because
// every step is idempotent (existing rows are found by send key, inbox
// publishes carry Nats-Msg-Id <msg_id>:<uid>).
func (pt *partition) process(ctx context.Context, msgs []jetstream.Msg) error {
	start := time.Now()
	sends := make([]send, len(msgs))
	var keys []store.SendKey
	var convIDs []int64
	firstOf := map[store.SendKey]int{} // the first send of each key in the batch
	for i, m := range msgs {
		s := &sends[i]
		s.msg = m
		s.reply = m.Headers().Get(streams.HeaderReply)
		rec := new(pb.SendRecord)
		if err := proto.Unmarshal(m.Data(), rec); err != nil {
			pt.f.metrics.malformed.Inc()
			pt.f.log.Error("undecodable SEND message dropped", zap.String("subject", m.Subject()), zap.Error(err))
			continue
		}
		s.rec = rec
		s.key = store.SendKey{Sender: rec.GetSenderUid(), ClientMsgID: rec.GetClientMsgId()}
		if bad := validate(rec); bad != nil {
			s.result = rejected(rec.GetClientMsgId(), bad.Code, bad.Message)
			continue
		}
		if _, seen := firstOf[s.key]; seen {
			continue
		}
		firstOf[s.key] = i
		keys = append(keys, s.key)
		convIDs = append(convIDs, rec.GetConvId())
	}
	convIDs = sortedUnique(convIDs)

	var fresh []*store.Message   // new rows of this batch
	var again []*store.Message   // stored rows not marked fanned out: publish again
	var earlier int              // of again, how many are other sends' (see below)
	var fannedTo map[int64]int64 // each conversation's last_seq after the batch
	var publish []delivery       // what to publish, to whom
	var rejects []store.Reject
	err := store.RunSendTx(ctx, pt.f.st.Pool, convIDs, keys, func(tx *store.SendTx) error {
		convs, lk := tx.Convs, tx.Lookup
		// Messages of these conversations that another fanout committed
		// and has not published (it is stuck on NATS, or died and its
		// sends are not redelivered yet; two fanouts serve a partition
		// while its pin moves) go out first, from here: an inbox entry
		// never precedes an earlier conv_seq of its conversation, which a
		// device that starts a conversation's order at the first entry it
		// sees would otherwise get late and out of order. The other
		// fanout's publishes of them are deduplicated (Nats-Msg-Id). Only
		// conversations whose last_seq is not where this fanout knows them
		// fanned out are looked at: one more round trip, on a
		// conversation's first batch after a start or after another
		// fanout wrote to it (every batch measured +0.2 ms on the live
		// path, 6 %).
		var check []int64
		for id, c := range convs {
			if c.LastSeq > 0 && pt.members.fannedTo(id) != c.LastSeq {
				check = append(check, id)
			}
		}
		if len(check) > 0 {
			unfanned, err := tx.Unfanned(ctx, sortedUnique(check))
			if err != nil {
				return err
			}
			ours := make(map[int64]bool, len(lk.Stored))
			for _, m := range lk.Stored {
				ours[m.MsgID] = true
			}
			for _, m := range unfanned {
				if !ours[m.MsgID] {
					again = append(again, m)
					earlier++
				}
			}
		}
		// Member lists: reload those whose member_ver moved. Under the row
		// lock they are the members at the conv_seqs this batch assigns.
		pt.members.makeRoom(len(convs))
		var stale []int64
		for id, c := range convs {
			if !pt.members.fresh(id, c.MemberVer) {
				stale = append(stale, id)
			}
		}
		if len(stale) > 0 {
			stale = sortedUnique(stale)
			lists, err := tx.ActiveMembers(ctx, stale)
			if err != nil {
				return err
			}
			for _, id := range stale {
				pt.members.put(id, convs[id].MemberVer, lists[id])
			}
		}

		lastSeq := map[int64]int64{}
		now := time.Now().UTC().Truncate(time.Millisecond)
		for _, k := range keys {
			s := &sends[firstOf[k]]
			rec := s.rec
			if m, ok := lk.Stored[k]; ok {
				s.result = stored(m)
				if !m.FannedOut {
					again = append(again, m)
				}
				continue
			}
			if r, ok := lk.Rejected[k]; ok {
				s.result = rejected(k.ClientMsgID, pb.ErrorCode(r.Code), r.Message)
				continue
			}
			conv, ok := convs[rec.GetConvId()]
			var reject *pb.SendResult
			switch {
			case !ok:
				reject = rejected(k.ClientMsgID, pb.ErrorCode_CONV_NOT_FOUND, fmt.Sprintf("conversation %d does not exist", rec.GetConvId()))
			case !pt.members.isMember(rec.GetConvId(), k.Sender):
				reject = rejected(k.ClientMsgID, pb.ErrorCode_NOT_MEMBER, fmt.Sprintf("user %d is not a member of conversation %d", k.Sender, rec.GetConvId()))
			}
			if reject != nil {
				s.result = reject
				rejects = append(rejects, store.Reject{Key: k, Code: int32(reject.Code), Message: reject.Message})
				continue
			}
			seq, ok := lastSeq[rec.GetConvId()]
			if !ok {
				seq = conv.LastSeq
			}
			seq++
			lastSeq[rec.GetConvId()] = seq
			id, err := pt.f.ids.next()
			if err != nil {
				return err
			}
			m := &store.Message{
				MsgID: id, ConvID: rec.GetConvId(), ConvSeq: seq,
				SenderUID: k.Sender, SenderDevice: rec.GetSenderDevice(), ClientMsgID: k.ClientMsgID,
				Kind: int(max(rec.GetKind(), 1)), Body: rec.GetText(), CreatedAt: now,
			}
			s.result = stored(m)
			fresh = append(fresh, m)
			publish = append(publish, delivery{m, pt.members.members(m.ConvID)})
		}
		fannedTo = make(map[int64]int64, len(convs))
		for id, c := range convs {
			fannedTo[id] = max(c.LastSeq, lastSeq[id])
		}
		return tx.Commit(ctx, fresh, lastSeq, rejects)
	})
	if err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	step := pt.f.metrics.since(stageCommit, start)
	if pt.f.afterCommit != nil {
		if err := pt.f.afterCommit(); err != nil {
			return err
		}
	}
	if earlier > 0 {
		pt.f.metrics.earlierPublished.Add(float64(earlier))
	}
	if len(again) > 0 {
		d, err := pt.membersAtSendTime(ctx, again)
		if err != nil {
			return err
		}
		publish = append(publish, d...)
	}

	// Within a conversation, entries go out in conv_seq order.
	slices.SortStableFunc(publish, func(a, b delivery) int {
		return cmp.Or(cmp.Compare(a.m.ConvID, b.m.ConvID), cmp.Compare(a.m.ConvSeq, b.m.ConvSeq))
	})
	// Only into streams known to hold everything Postgres records of
	// them (fence.go).
	need := make([]bool, pt.f.opts.Layout.InboxPartitions)
	for _, d := range publish {
		for _, uid := range d.to {
			need[ids.Partition(uid, len(need))] = true
		}
	}
	gen, starts, err := pt.f.fence.ready(ctx, need)
	if err != nil {
		if errors.Is(err, errInboxBehind) {
			pt.f.metrics.inboxBehind.Inc()
		}
		return err
	}
	written, err := pt.publish(ctx, publish, starts)
	if err != nil {
		var api *jetstream.APIError
		if errors.As(err, &api) && api.ErrorCode == streams.ErrCodeMsgIDInProcess {
			// A clustered stream keeps the id of a proposal its leader
			// lost (every node's power cut, a leader killed mid-write) as
			// "in process" for its whole duplicate window (2 minutes), and
			// refuses the id meanwhile. The entries are published again
			// under other ids: should the lost proposal still be applied,
			// its entry is a repeat the devices drop by msg_id.
			pt.salt++
			pt.f.metrics.idsSalted.Inc()
			pt.f.log.Warn("an inbox stream refuses a dedupe id as in process (a lost proposal): publishing under new ids",
				zap.Int("partition", pt.p), zap.Uint64("salt", pt.salt))
		}
		return fmt.Errorf("publish inbox entries: %w", err)
	}
	if !pt.f.fence.still(gen) {
		// A server that restarted meanwhile may have lost a suffix and
		// numbered these entries with seqs it had given before: check the
		// streams and publish again.
		return errors.New("fanout: NATS reconnected while the batch was published: published again once the streams are checked")
	}
	step = pt.f.metrics.since(stagePublish, step)
	pt.f.metrics.entries.Add(float64(len(written.Entries)))
	written.SendPartition = pt.p
	done := make([]int64, len(publish))
	for i, d := range publish {
		done[i] = d.m.MsgID
	}
	if err := pt.markFannedOut(ctx, done, written, msgs); err != nil {
		return err
	}
	pt.f.metrics.since(stageMark, step)
	// Every message of the batch's conversations is fanned out now: what
	// was known or looked at before, and what the batch added.
	for id, seq := range fannedTo {
		pt.members.setFanned(id, seq)
	}

	// SEND is a work queue: every message is acknowledged (and removed).
	// A lost ack means a redelivery, which finds the stored rows and answers
	// again without publishing.
	for _, m := range msgs {
		if err := m.Ack(); err != nil {
			pt.f.log.Warn("ack SEND message (it will be redelivered and answered again)", zap.Error(err))
			break
		}
	}
	pt.answer(sends, firstOf)
	pt.f.metrics.sends.WithLabelValues("stored").Add(float64(len(fresh)))
	pt.f.metrics.sends.WithLabelValues("repeated").Add(float64(len(keys) - len(fresh) - len(rejects)))
	pt.f.metrics.sends.WithLabelValues("rejected").Add(float64(len(rejects)))
	pt.f.metrics.batchSeconds.Observe(time.Since(start).Seconds())
	return nil
}

// dedupeID is the Nats-Msg-Id of message msgID's entry in uid's inbox,
// with the partition's salt when it has one.
func (pt *partition) dedupeID(msgID, uid int64, fenceStart uint64) string {
	id := streams.MessageDedupeIDAt(msgID, uid, fenceStart)
	if pt.salt > 0 {
		id += ":s" + strconv.FormatUint(pt.salt, 10)
	}
	return id
}

// membersAtSendTime returns the deliveries of stored messages that are
// published again (a crash or a failure after their commit left them
// unmarked): to the members at each message's conv_seq, whatever changed
// since. (Members who got their entry the first time get it again, and
// Nats-Msg-Id absorbs it within the INBOX dedupe window.)
func (pt *partition) membersAtSendTime(ctx context.Context, msgs []*store.Message) ([]delivery, error) {
	convIDs := make([]int64, len(msgs))
	for i, m := range msgs {
		convIDs[i] = m.ConvID
	}
	spans, err := pt.f.st.MemberSpans(ctx, sortedUnique(convIDs))
	if err != nil {
		return nil, fmt.Errorf("members at send time: %w", err)
	}
	hist := make(map[int64]*history, len(spans))
	out := make([]delivery, len(msgs))
	for i, m := range msgs {
		h := hist[m.ConvID]
		if h == nil {
			h = newHistory(spans[m.ConvID])
			hist[m.ConvID] = h
		}
		out[i] = delivery{m, h.membersAt(m.ConvSeq)}
	}
	return out, nil
}

// markFannedOut records that every inbox entry of msgIDs is written (the
// entries of w, with their seqs, into the archive: Postgres is the inbox
// index's store of record), trying until it succeeds or ctx ends. A send is neither acknowledged nor answered
// before: the mark is how a retry is recognised (the gateway answers a retry
// that JetStream deduped only once Postgres says fanned out, and a
// redelivered send whose row is not marked is published again, which
// Nats-Msg-Id absorbs only within the INBOX dedupe window). Only the mark is
// retried, not the batch: the entries are durable already.
func (pt *partition) markFannedOut(ctx context.Context, msgIDs []int64, w store.Written, msgs []jetstream.Msg) error {
	var b *backoff
	for {
		err := pt.f.st.MarkFannedOut(ctx, msgIDs, w)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("mark fanned out: %w", err)
		}
		pt.f.metrics.markRetries.Inc()
		pt.f.log.Warn("mark fanned out failed; retrying (the sends wait for it)", zap.Int("messages", len(msgIDs)), zap.Error(err))
		if b == nil {
			b = newBackoff(50*time.Millisecond, 5*time.Second)
		}
		b.sleep(ctx)
		// Keep the sends ours meanwhile (the backoff stays below ack_wait),
		// rather than have them redelivered and answered twice.
		for _, m := range msgs {
			_ = m.InProgress()
		}
	}
}

// answer publishes each send's result to the subject its gateway named. A
// lost answer is harmless: the client retries with the same client_msg_id.
func (pt *partition) answer(sends []send, firstOf map[store.SendKey]int) {
	for i := range sends {
		s := &sends[i]
		if s.reply == "" || s.rec == nil {
			continue
		}
		res := s.result
		if res == nil {
			res = sends[firstOf[s.key]].result
		}
		b, err := proto.Marshal(res)
		if err != nil {
			continue
		}
		if err := pt.f.nc.Publish(s.reply, b); err != nil {
			pt.f.log.Debug("answer", zap.Error(err))
		}
	}
}

// publish writes one inbox entry per recipient of every delivery and waits
// until JetStream acknowledged all of them. As each acknowledgement arrives
// (it carries the entry's inbox seq) the entry is announced, body included,
// on the member's live subject: gateways deliver it at once to connected
// devices, ahead of any backfill. It returns the entries written, with
// their seqs, and the highest seq of each INBOX partition. starts holds
// each partition's epoch start, which the dedupe ids carry
// (streams.MessageDedupeIDAt).
func (pt *partition) publish(ctx context.Context, ds []delivery, starts []uint64) (store.Written, error) {
	if len(ds) == 0 {
		return store.Written{}, nil
	}
	n := 0
	for _, d := range ds {
		n += len(d.to)
	}
	type target struct {
		m   *store.Message
		uid int64
		p   int
	}
	targets := make([]target, 0, n)
	parts := pt.f.opts.Layout.InboxPartitions
	timeout := time.NewTimer(pt.f.opts.PublishTimeout)
	defer timeout.Stop()
	// The partitions of this process share one publish window: each keeps
	// at most its share in flight, taking acknowledgements as it publishes
	// (a batch to large groups has more entries than the window;
	// publishing them all first stalled and failed the batch).
	window := max(publishWindow/max(len(pt.f.opts.Partitions), 1), 64)
	acks := pt.f.acks.batch(min(window, n)) // room for what can be in flight, not more
	defer acks.done()
	seqs := make([]uint64, n) // acknowledged entries: their inbox seq; 0 not yet
	var live, reply []byte
	// await takes acknowledgements until entry i's is in, and announces
	// entry i on the live lane: in publish order, so a member's live
	// entries of a conversation go out in conv_seq order.
	await := func(i int) error {
		for seqs[i] == 0 {
			select {
			case r := <-acks.results:
				if r.err != nil {
					return r.err
				}
				if r.i >= len(targets) || r.seq == 0 {
					return fmt.Errorf("publish acknowledgement for entry %d: seq %d", r.i, r.seq)
				}
				seqs[r.i] = r.seq
			case <-timeout.C:
				return fmt.Errorf("no publish ack within %s", pt.f.opts.PublishTimeout)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if pt.f.opts.NoLive {
			return nil
		}
		t := targets[i]
		live = wire.AppendMessage(live[:0], &wire.Message{
			Seq: seqs[i], MsgID: t.m.MsgID, ConvID: t.m.ConvID, ConvSeq: t.m.ConvSeq, SenderUID: t.m.SenderUID,
			Kind: uint32(t.m.Kind), Text: t.m.Body, CreatedAtMs: t.m.CreatedAt.UnixMilli(),
		})
		// At most once: a lost announcement only delays delivery until
		// the device's cursor consumer reads the entry.
		_ = pt.f.nc.Publish(streams.UserLive(t.p, t.uid), live)
		return nil
	}
	acked := 0
	for _, d := range ds {
		m := d.m
		payload, err := proto.Marshal(&pb.InboxEntry{
			MsgId: m.MsgID, ConvId: m.ConvID, ConvSeq: m.ConvSeq, SenderUid: m.SenderUID,
			Kind: uint32(m.Kind), CreatedAtMs: m.CreatedAt.UnixMilli(),
		})
		if err != nil {
			return store.Written{}, err
		}
		conv := strconv.FormatInt(m.ConvID, 10)
		for _, uid := range d.to {
			for len(targets)-acked >= window {
				if err := await(acked); err != nil {
					return store.Written{}, err
				}
				acked++
			}
			p := ids.Partition(uid, parts)
			nm := &nats.Msg{
				Subject: streams.InboxSubject(p, uid),
				Data:    payload,
				Header: nats.Header{
					jetstream.MsgIDHeader: {pt.dedupeID(m.MsgID, uid, starts[p])},
					streams.HeaderConv:    {conv},
					streams.HeaderKind:    {streams.KindMessage},
				},
			}
			if reply, err = acks.publish(nm, len(targets), reply); err != nil {
				return store.Written{}, err
			}
			targets = append(targets, target{m, uid, p})
		}
	}
	for ; acked < len(targets); acked++ {
		if err := await(acked); err != nil {
			return store.Written{}, err
		}
	}
	w := store.Written{Entries: make([]store.ArchivedEntry, len(targets)), Highs: make([]uint64, parts)}
	for i, t := range targets {
		w.Entries[i] = store.ArchivedEntry{UID: t.uid, Seq: seqs[i], MsgID: t.m.MsgID, ConvID: t.m.ConvID, ConvSeq: t.m.ConvSeq,
			Kind: int16(t.m.Kind), CreatedAtMs: t.m.CreatedAt.UnixMilli()}
		w.Highs[t.p] = max(w.Highs[t.p], seqs[i])
	}
	return w, nil
}
