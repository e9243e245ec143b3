package store_test

import (
	"context"
	"slices"
	"testing"

	"github.com/inboxd/inboxd/internal/testenv"
)

// trace names as recipients of a message exactly the members at its
// conv_seq, as the fanout delivers: a member who left and came back is a
// recipient of the messages of each of its memberships, not of those
// between them.
func TestTraceRecipientsAreTheMembersAtConvSeq(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	conv, seen := rejoined(t, st)
	if _, _, err := st.MarkRead(ctx, 3, conv, 4); err != nil {
		t.Fatal(err)
	}
	for seq := int64(1); seq <= 15; seq++ {
		tr, err := st.Trace(ctx, conv*1000000+seq)
		if err != nil {
			t.Fatal(err)
		}
		var uids []int64
		readSeq := map[int64]int64{}
		for _, r := range tr.Recipients {
			uids = append(uids, r.UID)
			readSeq[r.UID] = r.ReadSeq
		}
		want := []int64{1, 2}
		if slices.Contains(seen, seq) {
			want = []int64{1, 2, 3}
		}
		if tr.ConvSeq != seq || !slices.Equal(uids, want) {
			t.Errorf("message %d (conv_seq %d): recipients %v, want %v", seq, tr.ConvSeq, uids, want)
		}
		if len(uids) == 3 && readSeq[3] != 4 {
			t.Errorf("message %d: uid 3's read_seq %d, want 4", seq, readSeq[3])
		}
	}
}
