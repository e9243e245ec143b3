package archive

import (
	"testing"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/wire/pb"
)

// TestArchivedEntryFromStreamsFormat: the archive row of an entry written in
// the streams format holds what the entry holds, an event's position in
// conv_seq; an entry that does not decode is an error (the archiver quarantines it).
func TestArchivedEntryFromStreamsFormat(t *testing.T) {
	for _, c := range []struct {
		e    streams.Entry
		want store.ArchivedEntry
	}{
		{streams.Entry{MsgID: 1 << 40, ConvID: 7, ConvSeq: 3, SenderUID: 9, Kind: 1, CreatedAtMs: 5},
			store.ArchivedEntry{UID: 42, Seq: 11, MsgID: 1 << 40, ConvID: 7, ConvSeq: 3, Kind: 1, CreatedAtMs: 5}},
		{streams.Entry{ConvID: 7, ConvSeq: 12, EventType: pb.EventType_READ, EventPeer: 4, CreatedAtMs: 6},
			store.ArchivedEntry{UID: 42, Seq: 11, ConvID: 7, ConvSeq: 12, Event: int16(pb.EventType_READ), Peer: 4, CreatedAtMs: 6}},
	} {
		body, err := c.e.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		m := c.e.Msg(3, 42, body, streams.MessageDedupeID(c.e.MsgID, 42))
		got, err := archivedEntry(m.Subject, 11, m.Data)
		if err != nil || got != c.want {
			t.Errorf("archivedEntry(%+v) = %+v, %v; want %+v", c.e, got, err, c.want)
		}
	}
	if _, err := archivedEntry("inbox.3.42", 1, []byte{0xff, 0xff, 0xff}); err == nil {
		t.Error("garbage body archived")
	}
	if _, err := archivedEntry("inbox.3.x", 1, nil); err == nil {
		t.Error("subject without a uid archived")
	}
}
