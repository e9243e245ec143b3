package wire

import (
	"encoding/json"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire/pb"
)

// JSONFrame is the JSON form of a frame, used on WebSocket text messages and
// for debugging: {"v":1,"type":"send","body":{...}} where body is the
// protojson form of the frame's message (lowerCamelCase or the proto field
// names are both accepted).
type JSONFrame struct {
	V    int             `json:"v"`
	Type string          `json:"type"`
	Body json.RawMessage `json:"body,omitempty"`
}

var (
	jsonOut = protojson.MarshalOptions{UseProtoNames: true}
	jsonIn  = protojson.UnmarshalOptions{DiscardUnknown: false}
)

// MarshalJSONFrame returns the JSON form of m.
func MarshalJSONFrame(m proto.Message) ([]byte, error) {
	t, err := TypeOf(m)
	if err != nil {
		return nil, err
	}
	body, err := jsonOut.Marshal(m)
	if err != nil {
		return nil, err
	}
	return json.Marshal(JSONFrame{V: Version, Type: t.String(), Body: body})
}

// UnmarshalJSONFrame parses the JSON form of a frame.
func UnmarshalJSONFrame(b []byte) (FrameType, proto.Message, error) {
	// encoding/json would take invalid UTF-8 outside the body's strings
	// (in a key it ignores) silently; a text message must be UTF-8
	// (RFC 6455 5.6), and one that is not is refused as a whole.
	if !utf8.Valid(b) {
		return 0, nil, Errorf(pb.ErrorCode_BAD_FRAME, "json frame is not valid UTF-8")
	}
	var f JSONFrame
	if err := json.Unmarshal(b, &f); err != nil {
		return 0, nil, Errorf(pb.ErrorCode_BAD_FRAME, "json frame: %v", err)
	}
	if f.V != Version {
		return 0, nil, Errorf(pb.ErrorCode_UNSUPPORTED_VERSION, "protocol version %d is not supported; this server speaks %d", f.V, Version)
	}
	t, ok := typesByName[f.Type]
	if !ok {
		return 0, nil, Errorf(pb.ErrorCode_UNKNOWN_TYPE, "unknown frame type %q", f.Type)
	}
	m, err := NewBody(t)
	if err != nil {
		return 0, nil, err
	}
	if len(f.Body) > 0 {
		if err := jsonIn.Unmarshal(f.Body, m); err != nil {
			return 0, nil, Errorf(pb.ErrorCode_BAD_FRAME, "json %s body: %v", f.Type, err)
		}
	}
	return t, m, nil
}
