package wire

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/inboxd/inboxd/wire/pb"
)

func sampleMessages(n int) []Message {
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Seq: uint64(1000 + i), MsgID: 252788381291905024 + int64(i), ConvID: 42, ConvSeq: int64(i + 1),
			SenderUID: 7, Kind: 1, Text: "a message of a typical length, with ünïcode", CreatedAtMs: 1764420000000 + int64(i)}
	}
	return msgs
}

func TestAppendBatchFrameMatchesGeneratedCode(t *testing.T) {
	msgs := sampleMessages(3)
	msgs[1].Text = "" // zero values are omitted, as protobuf does
	msgs[2] = Message{Seq: 1003, ConvID: 42, EventType: uint32(pb.EventType_READ), EventUpTo: 17, EventPeer: 9, CreatedAtMs: 5}
	msgs = append(msgs, Message{Seq: 1004, MsgID: 11, ConvID: 43, ConvSeq: 2, SenderUID: 7, Kind: 1, CreatedAtMs: 6, Expired: true})
	raw, _ := proto.Marshal(&pb.Message{Seq: 5000, MsgId: 9, ConvId: 1, ConvSeq: 3, SenderUid: 2, Kind: 1, Text: "live"})
	h := &BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 77, HasMore: true, Newest: true,
		Expired: []ExpiredRange{{ConvID: 42, UpTo: 900}, {ConvID: 43, UpTo: 1}}}
	frame := AppendBatchFrame(nil, h, msgs, [][]byte{raw})
	if len(frame) != BatchFrameSize(h, msgs, [][]byte{raw}) {
		t.Fatalf("size %d, predicted %d", len(frame), BatchFrameSize(h, msgs, [][]byte{raw}))
	}
	_, m, err := Decode(frame)
	if err != nil {
		t.Fatal(err)
	}
	got := m.(*pb.Batch)
	want := &pb.Batch{Lane: pb.Lane_BACKFILL, BatchId: 77, HasMore: true, Newest: true,
		Expired: []*pb.ExpiredRange{{ConvId: 42, UpToConvSeq: 900}, {ConvId: 43, UpToConvSeq: 1}}}
	for _, x := range msgs {
		pm := &pb.Message{Seq: x.Seq, MsgId: x.MsgID, ConvId: x.ConvID, ConvSeq: x.ConvSeq,
			SenderUid: x.SenderUID, Kind: x.Kind, Text: x.Text, CreatedAtMs: x.CreatedAtMs, Expired: x.Expired}
		if x.EventType != 0 {
			pm.Event = &pb.Event{Type: pb.EventType(x.EventType), ConvId: x.ConvID, UpToConvSeq: x.EventUpTo, PeerUid: x.EventPeer}
		}
		want.Messages = append(want.Messages, pm)
	}
	want.Messages = append(want.Messages, &pb.Message{Seq: 5000, MsgId: 9, ConvId: 1, ConvSeq: 3, SenderUid: 2, Kind: 1, Text: "live"})
	if !proto.Equal(got, want) {
		t.Fatalf("decoded %v\nwant %v", got, want)
	}
	if s, ok := PeekSeq(raw); !ok || s != 5000 {
		t.Fatalf("PeekSeq = %d %v", s, ok)
	}
	if e, ok := PeekEntry(raw); !ok || e != (Entry{Seq: 5000, MsgID: 9, ConvID: 1, ConvSeq: 3, SenderUID: 2}) {
		t.Fatalf("PeekEntry = %+v %v", e, ok)
	}
	ev := AppendMessage(nil, &msgs[2])
	if e, ok := PeekEntry(ev); !ok || !e.Event || e.Seq != 1003 {
		t.Fatalf("PeekEntry(event) = %+v %v", e, ok)
	}
}

func BenchmarkAppendBatchFrame500(b *testing.B) {
	msgs := sampleMessages(500)
	h := &BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 1, HasMore: true}
	buf := make([]byte, 0, BatchFrameSize(h, msgs, nil))
	b.ReportAllocs()
	b.SetBytes(int64(cap(buf)))
	for i := 0; i < b.N; i++ {
		buf = AppendBatchFrame(buf[:0], h, msgs, nil)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
}

func BenchmarkProtoMarshalBatch500(b *testing.B) {
	msgs := sampleMessages(500)
	batch := &pb.Batch{Lane: pb.Lane_BACKFILL, BatchId: 1, HasMore: true}
	for _, x := range msgs {
		batch.Messages = append(batch.Messages, &pb.Message{Seq: x.Seq, MsgId: x.MsgID, ConvId: x.ConvID, ConvSeq: x.ConvSeq,
			SenderUid: x.SenderUID, Kind: x.Kind, Text: x.Text, CreatedAtMs: x.CreatedAtMs})
	}
	b.ReportAllocs()
	var buf []byte
	for i := 0; i < b.N; i++ {
		buf, _ = AppendFrame(buf[:0], batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
}

func BenchmarkDecodeBatch500(b *testing.B) {
	msgs := sampleMessages(500)
	h := &BatchHeader{Lane: pb.Lane_BACKFILL, BatchID: 1}
	frame := AppendBatchFrame(nil, h, msgs, nil)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, _, err := Decode(frame); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/msg")
}
