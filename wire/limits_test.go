package wire

import (
	"strings"
	"testing"

	"github.com/inboxd/inboxd/wire/pb"
)

func TestCheckSend(t *testing.T) {
	ok := func() *pb.Send {
		return &pb.Send{ConvId: 7, ClientMsgId: "c-1", Kind: KindText, Text: "héllo\n\tworld"}
	}
	with := func(f func(*pb.Send)) *pb.Send { s := ok(); f(s); return s }
	for _, tc := range []struct {
		name string
		send *pb.Send
		want string // "" = valid
	}{
		{"valid", ok(), ""},
		{"kind 0 means text", with(func(s *pb.Send) { s.Kind = 0 }), ""},
		{"empty text", with(func(s *pb.Send) { s.Text = "" }), ""},
		{"text at the limit", with(func(s *pb.Send) { s.Text = strings.Repeat("x", MaxTextLen) }), ""},
		{"client_msg_id at the limit", with(func(s *pb.Send) { s.ClientMsgId = strings.Repeat("é", MaxClientMsgIDLen/2) }), ""},
		{"conv_id zero", with(func(s *pb.Send) { s.ConvId = 0 }), "conv_id must be positive"},
		{"conv_id negative", with(func(s *pb.Send) { s.ConvId = -3 }), "conv_id must be positive"},
		{"client_msg_id empty", with(func(s *pb.Send) { s.ClientMsgId = "" }), "client_msg_id must be 1..128 bytes"},
		{"client_msg_id too long", with(func(s *pb.Send) { s.ClientMsgId = strings.Repeat("x", MaxClientMsgIDLen+1) }), "client_msg_id must be 1..128 bytes"},
		{"client_msg_id with a newline", with(func(s *pb.Send) { s.ClientMsgId = "a\nb" }), "client_msg_id must be printable UTF-8"},
		{"client_msg_id with DEL", with(func(s *pb.Send) { s.ClientMsgId = "a\x7fb" }), "client_msg_id must be printable UTF-8"},
		{"client_msg_id not UTF-8", with(func(s *pb.Send) { s.ClientMsgId = "a\xffb" }), "client_msg_id must be printable UTF-8"},
		{"text too long", with(func(s *pb.Send) { s.Text = strings.Repeat("x", MaxTextLen+1) }), "text exceeds 16384 bytes"},
		{"text not UTF-8", with(func(s *pb.Send) { s.Text = "\xc3" }), "text must be valid UTF-8"},
		{"unknown kind", with(func(s *pb.Send) { s.Kind = 2 }), "kind 2 is not supported (1 = text)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSend(tc.send)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e, isErr := err.(*Error)
			if !isErr || e.Code != pb.ErrorCode_INVALID_ARGUMENT || e.Message != tc.want {
				t.Fatalf("got %v, want INVALID_ARGUMENT %q", err, tc.want)
			}
		})
	}
}

// The fanout checks SEND records with the same function: a record refuses
// what the send it was made from refuses.
func TestCheckSendJudgesARecordLikeItsSend(t *testing.T) {
	s := &pb.Send{ConvId: 7, ClientMsgId: "a\x01", Kind: 1, Text: "x"}
	rec := &pb.SendRecord{SenderUid: 1, ConvId: s.ConvId, ClientMsgId: s.ClientMsgId, Kind: s.Kind, Text: s.Text}
	a, b := CheckSend(s), CheckSend(rec)
	if a == nil || b == nil || a.Error() != b.Error() {
		t.Fatalf("send: %v, record: %v", a, b)
	}
}

func BenchmarkCheckSend(b *testing.B) {
	s := &pb.Send{ConvId: 7, ClientMsgId: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", Kind: 1, Text: "a message of a typical length"}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if CheckSend(s) != nil {
			b.Fatal("refused")
		}
	}
}
