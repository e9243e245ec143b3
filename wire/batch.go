package wire

import (
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/inboxd/inboxd/wire/pb"
)

// Message is a delivered message in plain fields: the gateway's hot path
// encodes batches from these straight into its write buffer (no
// intermediate protobuf objects, no allocation). Its encoding is exactly
// pb.Message's.
type Message struct {
	Seq         uint64
	MsgID       int64
	ConvID      int64
	ConvSeq     int64
	SenderUID   int64
	Kind        uint32
	Text        string
	CreatedAtMs int64
	// Events (msg_id 0): the Event fields; ConvID is the event's conversation.
	EventType uint32
	EventUpTo int64
	EventPeer int64
	// Expired: retention removed the body (Text is empty); the entry is
	// still confirmed, and a client passes over its conv_seq.
	Expired bool
}

// ExpiredRange is pb.ExpiredRange: conv_seqs 1..UpTo of ConvID were
// removed by retention.
type ExpiredRange struct {
	ConvID int64
	UpTo   int64
}

// Field numbers of pb.Message and pb.Batch (wire/pb/inboxd.proto).
const (
	fMsgSeq       = 1
	fMsgMsgID     = 2
	fMsgConvID    = 3
	fMsgConvSeq   = 4
	fMsgSender    = 5
	fMsgKind      = 6
	fMsgText      = 7
	fMsgCreatedAt = 8
	fMsgEvent     = 9
	fMsgExpired   = 10

	fEvType = 1
	fEvConv = 2
	fEvUpTo = 3
	fEvPeer = 4

	fBatchLane     = 1
	fBatchMessages = 2
	fBatchHasMore  = 3
	fBatchID       = 4
	fBatchNewest   = 5
	fBatchExpired  = 6

	fExpConv = 1
	fExpUpTo = 2
)

func sizeVarintField(num protowire.Number, v uint64) int {
	if v == 0 {
		return 0 // proto3: zero values are not encoded
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(v)
}

func appendVarintField(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

// Size returns the encoded size of m (as a pb.Message body).
func (m *Message) Size() int {
	n := sizeVarintField(fMsgSeq, m.Seq) +
		sizeVarintField(fMsgMsgID, uint64(m.MsgID)) +
		sizeVarintField(fMsgConvID, uint64(m.ConvID)) +
		sizeVarintField(fMsgConvSeq, uint64(m.ConvSeq)) +
		sizeVarintField(fMsgSender, uint64(m.SenderUID)) +
		sizeVarintField(fMsgKind, uint64(m.Kind)) +
		sizeVarintField(fMsgCreatedAt, uint64(m.CreatedAtMs))
	if len(m.Text) > 0 {
		n += protowire.SizeTag(fMsgText) + protowire.SizeBytes(len(m.Text))
	}
	if m.EventType != 0 {
		n += protowire.SizeTag(fMsgEvent) + protowire.SizeBytes(m.eventSize())
	}
	if m.Expired {
		n += protowire.SizeTag(fMsgExpired) + 1
	}
	return n
}

func (m *Message) eventSize() int {
	return sizeVarintField(fEvType, uint64(m.EventType)) + sizeVarintField(fEvConv, uint64(m.ConvID)) +
		sizeVarintField(fEvUpTo, uint64(m.EventUpTo)) + sizeVarintField(fEvPeer, uint64(m.EventPeer))
}

// AppendMessage appends the encoding of m (a pb.Message body) to b.
func AppendMessage(b []byte, m *Message) []byte {
	b = appendVarintField(b, fMsgSeq, m.Seq)
	b = appendVarintField(b, fMsgMsgID, uint64(m.MsgID))
	b = appendVarintField(b, fMsgConvID, uint64(m.ConvID))
	b = appendVarintField(b, fMsgConvSeq, uint64(m.ConvSeq))
	b = appendVarintField(b, fMsgSender, uint64(m.SenderUID))
	b = appendVarintField(b, fMsgKind, uint64(m.Kind))
	if len(m.Text) > 0 {
		b = protowire.AppendTag(b, fMsgText, protowire.BytesType)
		b = protowire.AppendString(b, m.Text)
	}
	b = appendVarintField(b, fMsgCreatedAt, uint64(m.CreatedAtMs))
	if m.EventType != 0 {
		b = protowire.AppendTag(b, fMsgEvent, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(m.eventSize()))
		b = appendVarintField(b, fEvType, uint64(m.EventType))
		b = appendVarintField(b, fEvConv, uint64(m.ConvID))
		b = appendVarintField(b, fEvUpTo, uint64(m.EventUpTo))
		b = appendVarintField(b, fEvPeer, uint64(m.EventPeer))
	}
	if m.Expired {
		b = protowire.AppendTag(b, fMsgExpired, protowire.VarintType)
		b = append(b, 1)
	}
	return b
}

// BatchHeader holds the scalar fields of a Batch frame.
type BatchHeader struct {
	Lane    pb.Lane
	BatchID uint64
	HasMore bool
	Newest  bool // the newest page of an offline-too-long device: ahead of conv_seq order
	// Expired: the ranges retention removed, for conversations of the
	// batch's messages.
	Expired []ExpiredRange
}

func (r *ExpiredRange) size() int {
	return sizeVarintField(fExpConv, uint64(r.ConvID)) + sizeVarintField(fExpUpTo, uint64(r.UpTo))
}

func (h *BatchHeader) size() int {
	n := sizeVarintField(fBatchLane, uint64(h.Lane)) + sizeVarintField(fBatchID, h.BatchID)
	if h.HasMore {
		n += protowire.SizeTag(fBatchHasMore) + 1
	}
	if h.Newest {
		n += protowire.SizeTag(fBatchNewest) + 1
	}
	for i := range h.Expired {
		n += protowire.SizeTag(fBatchExpired) + protowire.SizeBytes(h.Expired[i].size())
	}
	return n
}

func (h *BatchHeader) append(b []byte) []byte {
	b = appendVarintField(b, fBatchLane, uint64(h.Lane))
	if h.HasMore {
		b = protowire.AppendTag(b, fBatchHasMore, protowire.VarintType)
		b = append(b, 1)
	}
	b = appendVarintField(b, fBatchID, h.BatchID)
	if h.Newest {
		b = protowire.AppendTag(b, fBatchNewest, protowire.VarintType)
		b = append(b, 1)
	}
	for i := range h.Expired {
		r := &h.Expired[i]
		b = protowire.AppendTag(b, fBatchExpired, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(r.size()))
		b = appendVarintField(b, fExpConv, uint64(r.ConvID))
		b = appendVarintField(b, fExpUpTo, uint64(r.UpTo))
	}
	return b
}

// BatchFrameSize returns the size of the whole Batch frame (header bytes
// included, no transport prefix) for msgs followed by raws, where each raw is
// an already encoded pb.Message body.
func BatchFrameSize(h *BatchHeader, msgs []Message, raws [][]byte) int {
	n := HeaderLen + h.size()
	for i := range msgs {
		n += protowire.SizeTag(fBatchMessages) + protowire.SizeBytes(msgs[i].Size())
	}
	for _, r := range raws {
		n += protowire.SizeTag(fBatchMessages) + protowire.SizeBytes(len(r))
	}
	return n
}

// AppendBatchFrame appends a whole Batch frame (version, type, body) to b:
// msgs first, then raws (already encoded pb.Message bodies). It allocates
// nothing when b has room.
func AppendBatchFrame(b []byte, h *BatchHeader, msgs []Message, raws [][]byte) []byte {
	b = append(b, Version, byte(TypeBatch))
	b = h.append(b)
	for i := range msgs {
		b = protowire.AppendTag(b, fBatchMessages, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(msgs[i].Size()))
		b = AppendMessage(b, &msgs[i])
	}
	for _, r := range raws {
		b = protowire.AppendTag(b, fBatchMessages, protowire.BytesType)
		b = protowire.AppendBytes(b, r)
	}
	return b
}

// PeekSeq returns the seq field of an encoded pb.Message body without
// decoding the rest (the gateway routes live messages by it).
func PeekSeq(b []byte) (uint64, bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
		if num == fMsgSeq && typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			return v, n >= 0
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, false
		}
		b = b[n:]
	}
	return 0, false
}

// Entry is what the gateway needs to know of a live entry without decoding
// it into objects: its inbox seq, conversation, position and sender.
type Entry struct {
	Seq       uint64
	MsgID     int64 // 0 for an event
	ConvID    int64
	ConvSeq   int64
	SenderUID int64
	Event     bool
}

// PeekEntry reads the routing fields of an encoded pb.Message body.
func PeekEntry(b []byte) (Entry, bool) {
	var e Entry
	seen := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return e, false
		}
		b = b[n:]
		if typ == protowire.VarintType {
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return e, false
			}
			b = b[n:]
			switch num {
			case fMsgSeq:
				e.Seq, seen = v, true
			case fMsgMsgID:
				e.MsgID = int64(v)
			case fMsgConvID:
				e.ConvID = int64(v)
			case fMsgConvSeq:
				e.ConvSeq = int64(v)
			case fMsgSender:
				e.SenderUID = int64(v)
			}
			continue
		}
		if num == fMsgEvent {
			e.Event = true
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return e, false
		}
		b = b[n:]
	}
	return e, seen
}
