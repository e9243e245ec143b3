package wire

import (
	"unicode/utf8"

	"github.com/inboxd/inboxd/wire/pb"
)

// The limits of a send. They are part of the protocol: a client that keeps
// within them is never refused for what its send holds, and every server
// component refuses one beyond them with the same code and wording.
const (
	// MaxClientMsgIDLen is the longest client_msg_id, in bytes. The id
	// travels in a Nats-Msg-Id header, hence also no control characters.
	MaxClientMsgIDLen = 128
	// MaxTextLen is the largest text of a message, in bytes.
	MaxTextLen = 16 << 10
	// KindText is the only message kind a client sends (0 on the wire
	// means it).
	KindText = 1
	// KindDeleted is a message whose sender's data was deleted (inboxctl
	// user delete): it keeps its place (msg_id, conv_id, conv_seq), its
	// text is empty. Only the server sets it; a send of it is refused.
	KindDeleted = 2
)

// SendContent is what CheckSend judges: a client's *pb.Send and the
// *pb.SendRecord the gateway writes to the SEND stream both have it.
type SendContent interface {
	GetConvId() int64
	GetClientMsgId() string
	GetKind() uint32
	GetText() string
}

// CheckSend returns an *Error (INVALID_ARGUMENT) saying why s can never be
// stored, or nil when it may be. The gateway checks every send with it
// before publishing; the fanout checks every SEND record with it again
// (the stream may hold records of an older gateway or written by hand), so
// both refuse the same sends with the same words.
func CheckSend(s SendContent) error {
	cmid, text := s.GetClientMsgId(), s.GetText()
	switch {
	case s.GetConvId() <= 0:
		return Errorf(pb.ErrorCode_INVALID_ARGUMENT, "conv_id must be positive")
	case cmid == "" || len(cmid) > MaxClientMsgIDLen:
		return Errorf(pb.ErrorCode_INVALID_ARGUMENT, "client_msg_id must be 1..%d bytes", MaxClientMsgIDLen)
	case !printable(cmid):
		return Errorf(pb.ErrorCode_INVALID_ARGUMENT, "client_msg_id must be printable UTF-8")
	case len(text) > MaxTextLen:
		return Errorf(pb.ErrorCode_INVALID_ARGUMENT, "text exceeds %d bytes", MaxTextLen)
	case !utf8.ValidString(text):
		return Errorf(pb.ErrorCode_INVALID_ARGUMENT, "text must be valid UTF-8")
	case s.GetKind() > KindText:
		return Errorf(pb.ErrorCode_INVALID_ARGUMENT, "kind %d is not supported (%d = text)", s.GetKind(), KindText)
	}
	return nil
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}
