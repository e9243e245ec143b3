package push

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// 64-bit ids travel as JSON strings (JavaScript relays read them exactly),
// counts as numbers, and no body field without a body.
func TestEventJSONShape(t *testing.T) {
	ev := Event{ID: EventID(2, 7), N: 7, UID: 2, CollapseKey: CollapseKey(2), ConvID: 15, SenderUID: 1,
		MsgID: 253726360759959552, ConvSeq: 42, SentAtMs: 1, Messages: 3, Conversations: 1, Unread: 5, ConvUnread: 3, CreatedAtMs: 2}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"2:7","n":7,"uid":"2","collapse_key":"inboxd:2","conv_id":"15","sender_uid":"1","msg_id":"253726360759959552",` +
		`"conv_seq":"42","sent_at_ms":1,"messages":3,"conversations":1,"unread":5,"conv_unread":3,"created_at_ms":2}`
	if string(b) != want {
		t.Fatalf("event JSON\n got %s\nwant %s", b, want)
	}
	var back Event
	if err := json.Unmarshal(b, &back); err != nil || back != ev {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
}

// A body is cut to MaxBody bytes on a rune boundary, and says so.
func TestTruncateKeepsUTF8(t *testing.T) {
	s := strings.Repeat("é", MaxBody) // 2 bytes each
	got, cut := truncate(s, MaxBody)
	if !cut || len(got) > MaxBody || !utf8.ValidString(got) || len(got) != MaxBody {
		t.Fatalf("truncate: %d bytes, cut %v, valid %v", len(got), cut, utf8.ValidString(got))
	}
	odd, _ := truncate("a"+s, MaxBody)
	if !utf8.ValidString(odd) || len(odd) != MaxBody-1 {
		t.Fatalf("truncate inside a rune: %d bytes, valid %v", len(odd), utf8.ValidString(odd))
	}
	if got, cut := truncate("short", MaxBody); got != "short" || cut {
		t.Fatalf("truncate of a short body: %q %v", got, cut)
	}
}

func TestOptionsValidate(t *testing.T) {
	o := DefaultOptions()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	o.After = MinAfter / 2
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--push-after") {
		t.Fatalf("push-after below the minimum: %v", err)
	}
	o = DefaultOptions()
	o.Collapse = -1
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--push-collapse") {
		t.Fatalf("negative collapse: %v", err)
	}
}
