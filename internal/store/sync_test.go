package store_test

import (
	"context"
	"testing"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
)

// The login summary pages by the last message's msg_id: across pages no
// conversation repeats and none is missed, even when every last message has
// the same time, and the last page says no more follow (also when the
// count is an exact multiple of the page size).
func TestSummaryPagesWithoutDuplicatesOrMisses(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	// 1,000 conversations of uid 7, three messages each, all at the same
	// instant; msg_ids unrelated to conv_ids. Every 10th is read to the
	// end, uid 7 left every 17th: neither is in the summary.
	_, err := st.Pool.Exec(ctx, `
		INSERT INTO conversation (conv_id, kind, last_seq) SELECT g, 2, 3 FROM generate_series(1, 1000) g;
		INSERT INTO conv_member (conv_id, uid, read_seq) SELECT g, 7, CASE WHEN g % 10 = 0 THEN 3 ELSE g % 3 END
		  FROM generate_series(1, 1000) g;
		UPDATE conv_member SET left_seq = 1 WHERE uid = 7 AND conv_id % 17 = 0;
		INSERT INTO conv_member (conv_id, uid) SELECT g, 8 FROM generate_series(1, 1000) g;
		INSERT INTO msg_content (msg_id, conv_id, conv_seq, sender_uid, sender_device, client_msg_id, kind, body, created_at)
		  SELECT (g * 7919 % 1000003) * 10 + s, g, s, 8, 'd', 'c' || g || '-' || s, 1, 'message ' || s, '2026-01-01T00:00:00Z'
		  FROM generate_series(1, 1000) g, generate_series(1, 3) s;
		ANALYZE`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]int64{} // conv → unread
	for g := int64(1); g <= 1000; g++ {
		if g%10 != 0 && g%17 != 0 {
			want[g] = 3 - g%3
		}
	}
	if len(want) != 847 { // 7 × 121: the last page is full
		t.Fatalf("fixture: %d conversations expected in the summary", len(want))
	}
	for _, limit := range []int{7, 100, store.SummaryLimit} {
		seen := map[int64]bool{}
		before, pages := int64(0), 0
		for {
			rows, more, err := st.Summary(ctx, 7, before, limit)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			if len(rows) > limit || (more && len(rows) != limit) {
				t.Fatalf("limit %d: page %d holds %d conversations (more %v)", limit, pages, len(rows), more)
			}
			for _, r := range rows {
				if seen[r.ConvID] {
					t.Fatalf("limit %d: conversation %d on two pages", limit, r.ConvID)
				}
				seen[r.ConvID] = true
				if w, ok := want[r.ConvID]; !ok || r.Unread != w || r.LastSeq != 3 || r.LastPreview != "message 3" {
					t.Fatalf("limit %d: row %+v, want unread %d (in summary: %v)", limit, r, w, ok)
				}
				if before != 0 && r.LastMsgID >= before {
					t.Fatalf("limit %d: msg_id %d not below the page's bound %d", limit, r.LastMsgID, before)
				}
				before = r.LastMsgID
			}
			if !more {
				break
			}
		}
		if len(seen) != len(want) {
			t.Fatalf("limit %d: %d conversations over %d pages, want %d", limit, len(seen), pages, len(want))
		}
		if wantPages := (len(want) + limit - 1) / limit; pages != wantPages {
			t.Fatalf("limit %d: %d pages, want %d (no empty last page)", limit, pages, wantPages)
		}
	}
}
