package wire

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire/pb"
)

// FuzzDecode: any bytes either decode to a frame that re-encodes and decodes
// to the same message, or fail with a coded *Error; never a panic.
func FuzzDecode(f *testing.F) {
	for _, m := range []proto.Message{
		&pb.Hello{Token: "t", DeviceKind: "mobile"},
		&pb.Send{ClientMsgId: "c-1", ConvId: 7, Kind: 1, Text: "héllo"},
		&pb.Ack{BatchIds: []uint64{1, 2}, Seqs: []uint64{9}},
		&pb.Pull{RequestId: 1, ConvId: 3, BeforeConvSeq: 10, Limit: 50},
		&pb.Batch{Lane: pb.Lane_LIVE, BatchId: 4, Messages: []*pb.Message{{Seq: 1, MsgId: 2, Text: "x", Event: &pb.Event{Type: pb.EventType_READ}}}},
	} {
		b, _ := AppendFrame(nil, m)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add([]byte{2, 1})
	f.Add([]byte{1, 200, 0xff})
	f.Fuzz(func(t *testing.T, frame []byte) {
		_, m, err := Decode(frame)
		if err != nil {
			if CodeOf(err) == pb.ErrorCode_INTERNAL {
				t.Fatalf("uncoded error %v", err)
			}
			return
		}
		again, err := AppendFrame(nil, m)
		if err != nil {
			t.Fatalf("re-encode %T: %v", m, err)
		}
		_, m2, err := Decode(again)
		if err != nil || !proto.Equal(m, m2) {
			t.Fatalf("round trip of %T changed it: %v", m, err)
		}
	})
}

// FuzzReadTCPFrame: a length-prefixed stream yields frames within the limit
// or a coded error / I/O error; never a panic or an oversized allocation.
func FuzzReadTCPFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 3, 1, 4, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 1, 1})
	f.Add([]byte{0, 0})
	f.Fuzz(func(t *testing.T, stream []byte) {
		r := bytes.NewReader(stream)
		for i := 0; i < 16; i++ {
			fr, err := ReadTCPFrame(r, nil, 1024)
			if err != nil {
				return
			}
			if len(fr) < HeaderLen || len(fr) > 1024 {
				t.Fatalf("frame of %d bytes passed the limits", len(fr))
			}
		}
	})
}

// FuzzJSONFrame: the JSON form never panics and errors carry codes.
func FuzzJSONFrame(f *testing.F) {
	f.Add([]byte(`{"v":1,"type":"send","body":{"client_msg_id":"a","conv_id":"1","text":"x"}}`))
	f.Add([]byte(`{"v":1,"type":"ack","body":{"batch_ids":["1"]}}`))
	f.Add([]byte(`{"v":2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, _, err := UnmarshalJSONFrame(b); err != nil && CodeOf(err) == pb.ErrorCode_INTERNAL {
			t.Fatalf("uncoded error %v", err)
		}
	})
}
