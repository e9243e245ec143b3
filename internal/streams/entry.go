package streams

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

// The inbox entry format lives here and nowhere else: an INBOX_<p> message
// on subject inbox.<p>.<uid> whose body is a pb.InboxEntry (a message
// reference or a per-user event), with the conversation and the kind in
// headers (HeaderConv, HeaderKind) and Nats-Msg-Id as its dedupe id. The
// fanout and the gateway's events encode it, the gateway's tail reads, the
// archiver, the tests and inboxbench decode it.

// Entry is one inbox entry, decoded. Events (read_sync, receipts) have
// EventType set, MsgID 0, and their position (up_to_conv_seq) in ConvSeq.
type Entry struct {
	MsgID       int64
	ConvID      int64
	ConvSeq     int64
	SenderUID   int64
	Kind        uint32
	CreatedAtMs int64
	EventType   pb.EventType
	EventPeer   int64
}

// IsEvent reports whether e is a per-user event rather than a message.
func (e *Entry) IsEvent() bool { return e.EventType != pb.EventType_EVENT_NONE }

// HeaderKindOf returns the HeaderKind value of e: "msg", "read_sync" or "receipt".
func (e *Entry) HeaderKindOf() string {
	switch e.EventType {
	case pb.EventType_EVENT_NONE:
		return KindMessage
	case pb.EventType_READ_SYNC:
		return "read_sync"
	default:
		return "receipt"
	}
}

// Marshal returns the entry's body (a pb.InboxEntry).
func (e *Entry) Marshal() ([]byte, error) {
	pe := &pb.InboxEntry{MsgId: e.MsgID, ConvId: e.ConvID, ConvSeq: e.ConvSeq, SenderUid: e.SenderUID,
		Kind: e.Kind, CreatedAtMs: e.CreatedAtMs}
	if e.IsEvent() {
		pe = &pb.InboxEntry{ConvId: e.ConvID, CreatedAtMs: e.CreatedAtMs,
			Event: &pb.Event{Type: e.EventType, ConvId: e.ConvID, UpToConvSeq: e.ConvSeq, PeerUid: e.EventPeer}}
	}
	return proto.Marshal(pe)
}

// Msg returns the NATS message that writes body (e.Marshal's) into uid's
// inbox in partition p, deduplicated by dedupeID within the stream's window.
// A fanout writing one message to many members marshals it once and calls
// Msg per member.
func (e *Entry) Msg(p int, uid int64, body []byte, dedupeID string) *nats.Msg {
	return e.MsgOn(InboxSubject(p, uid), body, dedupeID)
}

// MsgOn is Msg on another subject than an inbox's: inboxbench's raw publish
// baseline writes the fanout's messages into copies of the INBOX streams.
func (e *Entry) MsgOn(subject string, body []byte, dedupeID string) *nats.Msg {
	return &nats.Msg{
		Subject: subject,
		Data:    body,
		Header: nats.Header{
			jetstream.MsgIDHeader: {dedupeID},
			HeaderConv:            {strconv.FormatInt(e.ConvID, 10)},
			HeaderKind:            {e.HeaderKindOf()},
		},
	}
}

// MessageDedupeID is the Nats-Msg-Id of message msgID's entry in uid's inbox.
func MessageDedupeID(msgID, uid int64) string {
	return strconv.FormatInt(msgID, 10) + ":" + strconv.FormatInt(uid, 10)
}

// MessageDedupeIDAt is the Nats-Msg-Id of message msgID's entry in uid's
// inbox while the partition's sequences start at fenceStart (the epoch
// start the syncer recorded: 0 or 1 for the installation's first stream,
// where it is MessageDedupeID). A fence purges entries the stream's
// duplicate window still remembers; the id of a publish after it differs,
// so that such an entry is stored again instead of being taken for a
// duplicate of one that is gone.
func MessageDedupeIDAt(msgID, uid int64, fenceStart uint64) string {
	if fenceStart <= 1 {
		return MessageDedupeID(msgID, uid)
	}
	return MessageDedupeID(msgID, uid) + ":" + strconv.FormatUint(fenceStart, 10)
}

// DecodeEntry decodes an entry's body.
func DecodeEntry(body []byte) (Entry, error) {
	var pe pb.InboxEntry
	if err := proto.Unmarshal(body, &pe); err != nil {
		return Entry{}, fmt.Errorf("inbox entry: %w", err)
	}
	e := Entry{MsgID: pe.GetMsgId(), ConvID: pe.GetConvId(), ConvSeq: pe.GetConvSeq(), SenderUID: pe.GetSenderUid(),
		Kind: pe.GetKind(), CreatedAtMs: pe.GetCreatedAtMs()}
	if ev := pe.GetEvent(); ev != nil {
		if ev.GetType() == pb.EventType_EVENT_NONE {
			return Entry{}, fmt.Errorf("inbox entry: event without a type")
		}
		e = Entry{ConvID: ev.GetConvId(), ConvSeq: ev.GetUpToConvSeq(), CreatedAtMs: pe.GetCreatedAtMs(),
			EventType: ev.GetType(), EventPeer: ev.GetPeerUid()}
	}
	return e, nil
}

// Wire returns the entry as delivered to a device at inbox sequence seq
// (without the body text, which comes from Postgres).
func (e *Entry) Wire(seq uint64) wire.Message {
	if e.IsEvent() {
		return wire.Message{Seq: seq, ConvID: e.ConvID, EventType: uint32(e.EventType),
			EventUpTo: e.ConvSeq, EventPeer: e.EventPeer}
	}
	return wire.Message{Seq: seq, MsgID: e.MsgID, ConvID: e.ConvID, ConvSeq: e.ConvSeq,
		SenderUID: e.SenderUID, Kind: e.Kind, CreatedAtMs: e.CreatedAtMs}
}

// SubjectUID returns the partition and uid of an inbox subject inbox.<p>.<uid>.
func SubjectUID(subject string) (p int, uid int64, err error) {
	rest, ok := strings.CutPrefix(subject, "inbox.")
	ps, us, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 {
		return 0, 0, fmt.Errorf("inbox subject %q: want inbox.<p>.<uid>", subject)
	}
	if p, err = strconv.Atoi(ps); err != nil || p < 0 {
		return 0, 0, fmt.Errorf("inbox subject %q: bad partition", subject)
	}
	if uid, err = strconv.ParseInt(us, 10, 64); err != nil || uid <= 0 {
		return 0, 0, fmt.Errorf("inbox subject %q: bad uid", subject)
	}
	return p, uid, nil
}
