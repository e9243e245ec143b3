package streams

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/inboxd/inboxd/wire"
	"github.com/inboxd/inboxd/wire/pb"
)

func TestEntryRoundTrip(t *testing.T) {
	for _, e := range []Entry{
		{MsgID: 1 << 40, ConvID: 7, ConvSeq: 3, SenderUID: 9, Kind: 1, CreatedAtMs: 1700000000000},
		{ConvID: 7, ConvSeq: 12, CreatedAtMs: 5, EventType: pb.EventType_READ, EventPeer: 4},
		{ConvID: 8, ConvSeq: 2, EventType: pb.EventType_READ_SYNC},
	} {
		body, err := e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeEntry(body)
		if err != nil {
			t.Fatal(err)
		}
		if got != e {
			t.Fatalf("round trip: got %+v, want %+v", got, e)
		}
		m := e.Msg(3, 42, body, "x:42")
		if m.Subject != "inbox.3.42" || m.Header.Get(HeaderKind) != e.HeaderKindOf() || m.Header.Get("Nats-Msg-Id") != "x:42" {
			t.Fatalf("msg %+v", m)
		}
		if p, uid, err := SubjectUID(m.Subject); err != nil || p != 3 || uid != 42 {
			t.Fatalf("SubjectUID(%q) = %d %d %v", m.Subject, p, uid, err)
		}
		if on := e.MsgOn("copy.3.42", body, "x:42"); on.Subject != "copy.3.42" || !reflect.DeepEqual(on.Header, m.Header) || !bytes.Equal(on.Data, m.Data) {
			t.Fatalf("MsgOn %+v differs from Msg %+v in more than the subject", on, m)
		}
	}
	ev := Entry{ConvID: 7, ConvSeq: 12, EventType: pb.EventType_DELIVERED, EventPeer: 4}
	if w := ev.Wire(99); w != (wire.Message{Seq: 99, ConvID: 7, EventType: uint32(pb.EventType_DELIVERED), EventUpTo: 12, EventPeer: 4}) {
		t.Fatalf("event wire form %+v", w)
	}
}

func TestDecodeEntryRejectsGarbage(t *testing.T) {
	if _, err := DecodeEntry([]byte{0xff, 0xff, 0xff}); err == nil {
		t.Fatal("garbage decoded")
	}
	for _, s := range []string{"inbox.3", "inbox.x.4", "inbox.3.-1", "send.3.4", "inbox.3.4x"} {
		if _, _, err := SubjectUID(s); err == nil {
			t.Errorf("SubjectUID(%q) accepted", s)
		}
	}
}
