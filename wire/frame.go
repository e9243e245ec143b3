// Package wire is the inboxd wire protocol: frame layout, frame types, the
// codec for both transports (raw TCP with a length prefix, WebSocket with one
// frame per binary message) and the JSON form used for debugging.
//
// The schema of every frame body is wire/pb/inboxd.proto.
package wire

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire/pb"
)

// Version is the protocol version this package speaks. It is the first byte
// of every frame.
const Version = 1

// HeaderLen is the size of the frame header: version and type.
const HeaderLen = 2

// DefaultMaxFrame is the largest frame (header and body) a peer accepts unless
// configured otherwise.
const DefaultMaxFrame = 64 << 10

// FrameType is the second byte of a frame and names the message in its body.
type FrameType uint8

// Client → server frames.
const (
	TypeHello          FrameType = 1
	TypeSend           FrameType = 2
	TypeAck            FrameType = 3
	TypePing           FrameType = 4
	TypeSummaryRequest FrameType = 5
	TypePull           FrameType = 6
	TypeRead           FrameType = 7
	TypeAckRange       FrameType = 8
	TypeReadCount      FrameType = 9
	TypeRefresh        FrameType = 10
)

// Server → client frames.
const (
	TypeWelcome         FrameType = 64
	TypeSendResult      FrameType = 65
	TypeBatch           FrameType = 66
	TypeError           FrameType = 67
	TypePong            FrameType = 68
	TypeSummary         FrameType = 69
	TypePullResult      FrameType = 70
	TypeReadResult      FrameType = 71
	TypeReadCountResult FrameType = 72
	TypeRefreshResult   FrameType = 73
)

var typeNames = map[FrameType]string{
	TypeHello: "hello", TypeSend: "send", TypeAck: "ack", TypePing: "ping",
	TypeWelcome: "welcome", TypeSendResult: "send_result", TypeBatch: "batch",
	TypeError: "error", TypePong: "pong",
	TypeSummaryRequest: "summary_request", TypePull: "pull", TypeRead: "read", TypeAckRange: "ack_range",
	TypeReadCount: "read_count", TypeSummary: "summary", TypePullResult: "pull_result",
	TypeReadResult: "read_result", TypeReadCountResult: "read_count_result",
	TypeRefresh: "refresh", TypeRefreshResult: "refresh_result",
}

var typesByName = func() map[string]FrameType {
	m := make(map[string]FrameType, len(typeNames))
	for t, n := range typeNames {
		m[n] = t
	}
	return m
}()

func (t FrameType) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Known reports whether t is a frame type of this protocol version.
func (t FrameType) Known() bool {
	_, ok := typeNames[t]
	return ok
}

// FromClient reports whether t is sent by clients.
func (t FrameType) FromClient() bool { return t.Known() && t < 64 }

// NewBody returns an empty message of the type a frame of type t carries.
func NewBody(t FrameType) (proto.Message, error) {
	switch t {
	case TypeHello:
		return new(pb.Hello), nil
	case TypeSend:
		return new(pb.Send), nil
	case TypeAck:
		return new(pb.Ack), nil
	case TypePing:
		return new(pb.Ping), nil
	case TypeWelcome:
		return new(pb.Welcome), nil
	case TypeSendResult:
		return new(pb.SendResult), nil
	case TypeBatch:
		return new(pb.Batch), nil
	case TypeError:
		return new(pb.Error), nil
	case TypePong:
		return new(pb.Pong), nil
	case TypeSummaryRequest:
		return new(pb.SummaryRequest), nil
	case TypePull:
		return new(pb.Pull), nil
	case TypeRead:
		return new(pb.Read), nil
	case TypeAckRange:
		return new(pb.AckRange), nil
	case TypeReadCount:
		return new(pb.ReadCount), nil
	case TypeSummary:
		return new(pb.Summary), nil
	case TypePullResult:
		return new(pb.PullResult), nil
	case TypeReadResult:
		return new(pb.ReadResult), nil
	case TypeReadCountResult:
		return new(pb.ReadCountResult), nil
	case TypeRefresh:
		return new(pb.Refresh), nil
	case TypeRefreshResult:
		return new(pb.RefreshResult), nil
	}
	return nil, Errorf(pb.ErrorCode_UNKNOWN_TYPE, "unknown frame type %d", uint8(t))
}

// TypeOf returns the frame type that carries m.
func TypeOf(m proto.Message) (FrameType, error) {
	switch m.(type) {
	case *pb.Hello:
		return TypeHello, nil
	case *pb.Send:
		return TypeSend, nil
	case *pb.Ack:
		return TypeAck, nil
	case *pb.Ping:
		return TypePing, nil
	case *pb.Welcome:
		return TypeWelcome, nil
	case *pb.SendResult:
		return TypeSendResult, nil
	case *pb.Batch:
		return TypeBatch, nil
	case *pb.Error:
		return TypeError, nil
	case *pb.Pong:
		return TypePong, nil
	case *pb.SummaryRequest:
		return TypeSummaryRequest, nil
	case *pb.Pull:
		return TypePull, nil
	case *pb.Read:
		return TypeRead, nil
	case *pb.AckRange:
		return TypeAckRange, nil
	case *pb.ReadCount:
		return TypeReadCount, nil
	case *pb.Summary:
		return TypeSummary, nil
	case *pb.PullResult:
		return TypePullResult, nil
	case *pb.ReadResult:
		return TypeReadResult, nil
	case *pb.ReadCountResult:
		return TypeReadCountResult, nil
	case *pb.Refresh:
		return TypeRefresh, nil
	case *pb.RefreshResult:
		return TypeRefreshResult, nil
	}
	return 0, fmt.Errorf("wire: %T is not a frame body", m)
}

var marshal = proto.MarshalOptions{}

// AppendFrame appends the frame of m (header and body, no length prefix) to
// dst and returns the extended slice.
func AppendFrame(dst []byte, m proto.Message) ([]byte, error) {
	t, err := TypeOf(m)
	if err != nil {
		return dst, err
	}
	dst = append(dst, Version, byte(t))
	return marshal.MarshalAppend(dst, m)
}

// ParseHeader checks a frame's header and returns its type and body.
// Errors are *Error with code BAD_FRAME, UNSUPPORTED_VERSION or UNKNOWN_TYPE.
func ParseHeader(frame []byte) (FrameType, []byte, error) {
	if len(frame) < HeaderLen {
		return 0, nil, Errorf(pb.ErrorCode_BAD_FRAME, "frame of %d bytes is shorter than its header", len(frame))
	}
	if frame[0] != Version {
		return 0, nil, Errorf(pb.ErrorCode_UNSUPPORTED_VERSION, "protocol version %d is not supported; this server speaks %d", frame[0], Version)
	}
	t := FrameType(frame[1])
	if !t.Known() {
		return 0, nil, Errorf(pb.ErrorCode_UNKNOWN_TYPE, "unknown frame type %d", frame[1])
	}
	return t, frame[HeaderLen:], nil
}

// Decode parses a whole frame into a new message of its type.
func Decode(frame []byte) (FrameType, proto.Message, error) {
	t, body, err := ParseHeader(frame)
	if err != nil {
		return 0, nil, err
	}
	m, err := NewBody(t)
	if err != nil {
		return 0, nil, err
	}
	if err := proto.Unmarshal(body, m); err != nil {
		return 0, nil, Errorf(pb.ErrorCode_BAD_FRAME, "%s frame: %v", t, err)
	}
	return t, m, nil
}
