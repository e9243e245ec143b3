package wire

import (
	"bytes"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire/pb"
)

func TestFrameRoundTrip(t *testing.T) {
	for _, m := range []proto.Message{
		&pb.Hello{Token: "t", DeviceKind: "mobile"},
		&pb.Send{ClientMsgId: "c", ConvId: 7, Kind: 1, Text: "héllo"},
		&pb.SendResult{ClientMsgId: "c", MsgId: 1, ConvSeq: 2, Status: pb.SendStatus_STORED},
		&pb.Batch{Lane: pb.Lane_LIVE, Messages: []*pb.Message{{Seq: 1, MsgId: 2, Text: "x"}}, HasMore: true},
	} {
		f, err := AppendFrame(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if f[0] != Version {
			t.Fatalf("version byte %d", f[0])
		}
		_, got, err := Decode(f)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, m) {
			t.Fatalf("round trip: %v != %v", got, m)
		}
		js, err := MarshalJSONFrame(m)
		if err != nil {
			t.Fatal(err)
		}
		_, got, err = UnmarshalJSONFrame(js)
		if err != nil {
			t.Fatalf("json %s: %v", js, err)
		}
		if !proto.Equal(got, m) {
			t.Fatalf("json round trip: %v != %v", got, m)
		}
	}
}

func TestDecodeRefusesBadFramesWithCodes(t *testing.T) {
	valid, _ := AppendFrame(nil, &pb.Ping{Nonce: 1})
	for name, c := range map[string]struct {
		frame []byte
		code  pb.ErrorCode
	}{
		"empty":           {nil, pb.ErrorCode_BAD_FRAME},
		"header only one": {[]byte{Version}, pb.ErrorCode_BAD_FRAME},
		"version 2":       {append([]byte{2}, valid[1:]...), pb.ErrorCode_UNSUPPORTED_VERSION},
		"unknown type":    {[]byte{Version, 200}, pb.ErrorCode_UNKNOWN_TYPE},
		"bad protobuf":    {[]byte{Version, byte(TypeSend), 0xff, 0xff, 0xff}, pb.ErrorCode_BAD_FRAME},
		"invalid utf-8":   {append([]byte{Version, byte(TypeSend)}, 0x22, 2, 0xff, 0xfe), pb.ErrorCode_BAD_FRAME},
	} {
		_, _, err := Decode(c.frame)
		if CodeOf(err) != c.code {
			t.Errorf("%s: err %v, want code %s", name, err, c.code)
		}
	}
	for name, c := range map[string]struct {
		js   string
		code pb.ErrorCode
	}{
		"not json":     {`{`, pb.ErrorCode_BAD_FRAME},
		"version 3":    {`{"v":3,"type":"ping"}`, pb.ErrorCode_UNSUPPORTED_VERSION},
		"unknown type": {`{"v":1,"type":"teleport"}`, pb.ErrorCode_UNKNOWN_TYPE},
		"bad body":     {`{"v":1,"type":"send","body":{"conv_id":"x"}}`, pb.ErrorCode_BAD_FRAME},
	} {
		_, _, err := UnmarshalJSONFrame([]byte(c.js))
		if CodeOf(err) != c.code {
			t.Errorf("json %s: err %v, want code %s", name, err, c.code)
		}
	}
}

func TestReadTCPFrameLimits(t *testing.T) {
	frame, _ := AppendFrame(nil, &pb.Ping{Nonce: 9})
	buf, at := AppendLengthPrefix(nil)
	buf = append(buf, frame...)
	PutLengthPrefix(buf, at)

	got, err := ReadTCPFrame(bytes.NewReader(buf), nil, DefaultMaxFrame)
	if err != nil || !bytes.Equal(got, frame) {
		t.Fatalf("read %x, %v", got, err)
	}
	huge := []byte{0x7f, 0xff, 0xff, 0xff}
	if _, err := ReadTCPFrame(bytes.NewReader(huge), nil, DefaultMaxFrame); CodeOf(err) != pb.ErrorCode_FRAME_TOO_LARGE {
		t.Fatalf("huge length: %v", err)
	}
	short := []byte{0, 0, 0, 1, Version}
	if _, err := ReadTCPFrame(bytes.NewReader(short), nil, DefaultMaxFrame); CodeOf(err) != pb.ErrorCode_BAD_FRAME {
		t.Fatalf("length below header: %v", err)
	}
	truncated := buf[:len(buf)-1]
	if _, err := ReadTCPFrame(bytes.NewReader(truncated), nil, DefaultMaxFrame); err == nil || CodeOf(err) != pb.ErrorCode_INTERNAL {
		t.Fatalf("truncated body: %v (want an I/O error)", err)
	}
	var e *Error
	if _, err := ReadTCPFrame(bytes.NewReader(huge), nil, DefaultMaxFrame); !errors.As(err, &e) {
		t.Fatal("limit errors must be *Error")
	}
}
