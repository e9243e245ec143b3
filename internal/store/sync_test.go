package store_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/wire"
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

// rejoined is a group where uid 3 joined, left, came back, left and came
// back again: members 1 (the sender of every message) and 2 throughout,
// 3 a member for (0, 4], (8, 10] and (13, ∞), last_seq 15. The fanout
// delivered seqs 1-4, 9-10 and 14-15 to 3: exactly what it may read.
func rejoined(t *testing.T, st *store.Store) (conv int64, seen []int64) {
	return rejoinedIn(t, st, false)
}

func rejoinedIn(t *testing.T, st *store.Store, shareHistory bool) (conv int64, seen []int64) {
	t.Helper()
	ctx := context.Background()
	conv, _, err := st.CreateConversation(ctx, store.KindGroup, []int64{1, 2, 3}, shareHistory)
	if err != nil {
		t.Fatal(err)
	}
	send := func(n int) { sendStored(t, st, conv, 1, n) }
	change := func(add bool) {
		var err error
		if add {
			_, err = st.AddMembers(ctx, conv, []int64{3})
		} else {
			_, err = st.RemoveMembers(ctx, conv, []int64{3})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	send(4)
	change(false)
	send(4)
	change(true)
	send(2)
	change(false)
	send(3)
	change(true)
	send(2)
	// What the fanout delivers by: the same spans.
	spans, err := st.MemberSpans(ctx, []int64{conv})
	if err != nil {
		t.Fatal(err)
	}
	want := []store.MemberSpan{{UID: 3, After: 0, Until: 4}, {UID: 3, After: 8, Until: 10}, {UID: 3, After: 13, Until: math.MaxInt64}}
	if got := slices.DeleteFunc(spans[conv], func(sp store.MemberSpan) bool { return sp.UID != 3 }); !slices.Equal(got, want) {
		t.Fatalf("uid 3's spans %v, want %v", got, want)
	}
	return conv, []int64{1, 2, 3, 4, 9, 10, 14, 15}
}

// sendStored stores n messages of sender in conv as the fanout does (the
// next conv_seqs, last_seq moved with them); msg_id is conv_id·10⁶ + conv_seq.
func sendStored(t *testing.T, st *store.Store, conv, sender int64, n int) {
	t.Helper()
	_, err := st.Pool.Exec(context.Background(), `
		WITH c AS (UPDATE conversation SET last_seq = last_seq + $3 WHERE conv_id = $1 RETURNING last_seq)
		INSERT INTO msg_content (msg_id, conv_id, conv_seq, sender_uid, sender_device, client_msg_id, kind, body, created_at)
		SELECT $1 * 1000000 + s, $1, s, $2, 'd', 'c' || $1 || '-' || s, 1, 'message ' || s, now()
		FROM c, generate_series(c.last_seq - $3 + 1, c.last_seq) s`, conv, sender, n)
	if err != nil {
		t.Fatal(err)
	}
}

// A member who left and came back pulls exactly the messages of its
// memberships (they were delivered to it then), none of the holes between
// them: page by page forwards and backwards at every page size, across the
// holes, with has_more false only on the last page and no empty last page;
// pulls starting inside a hole; and the same once it left for good.
func TestRejoinedMemberPullsItsSpans(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	conv, want := rejoined(t, st)
	check := func(want []int64) {
		t.Helper()
		for limit := 1; limit <= len(want)+1; limit++ {
			var fwd, back []int64
			pages := 0
			for after := int64(0); ; pages++ {
				msgs, more, err := pull(ctx, st, 3, conv, after, 0, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(msgs) == 0 || len(msgs) > limit || (more && len(msgs) != limit) {
					t.Fatalf("limit %d forward after %d: %v (more %v)", limit, after, seqs(msgs), more)
				}
				fwd = append(fwd, seqs(msgs)...)
				after = msgs[len(msgs)-1].ConvSeq
				if !more {
					break
				}
			}
			for before := int64(1 << 40); ; {
				msgs, more, err := pull(ctx, st, 3, conv, 0, before, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(msgs) == 0 || len(msgs) > limit || (more && len(msgs) != limit) {
					t.Fatalf("limit %d backward before %d: %v (more %v)", limit, before, seqs(msgs), more)
				}
				back = append(seqs(msgs), back...)
				before = msgs[0].ConvSeq
				if !more {
					break
				}
			}
			if !slices.Equal(fwd, want) || !slices.Equal(back, want) {
				t.Fatalf("limit %d: forward %v, backward %v, want %v", limit, fwd, back, want)
			}
			if wantPages := (len(want) + limit - 1) / limit; pages+1 != wantPages {
				t.Fatalf("limit %d: %d pages forward, want %d", limit, pages+1, wantPages)
			}
		}
	}
	check(want)

	// From inside a hole, both ways.
	for _, tc := range []struct {
		after, before int64
		want          []int64
		more          bool
	}{
		{after: 6, want: []int64{9, 10, 14}, more: true},
		{after: 11, want: []int64{14, 15}},
		{before: 12, want: []int64{4, 9, 10}, more: true},
		{before: 7, want: []int64{2, 3, 4}, more: true},
		{after: 15},
	} {
		msgs, more, err := pull(ctx, st, 3, conv, tc.after, tc.before, 3)
		if err != nil || !slices.Equal(seqs(msgs), tc.want) || more != tc.more {
			t.Errorf("after %d before %d: %v more %v (%v), want %v more %v", tc.after, tc.before, seqs(msgs), more, err, tc.want, tc.more)
		}
	}
	// Members who never left still see everything since they joined.
	if msgs, more, err := pull(ctx, st, 2, conv, 0, 0, 50); err != nil || len(msgs) != 15 || more {
		t.Fatalf("uid 2 pulled %v (more %v, %v), want 1-15", seqs(msgs), more, err)
	}

	// Left for good: the spans stay, nothing after them appears.
	if _, err := st.RemoveMembers(ctx, conv, []int64{3}); err != nil {
		t.Fatal(err)
	}
	sendStored(t, st, conv, 1, 2)
	check(want)
	if _, _, err := pull(ctx, st, 9, conv, 0, 0, 10); !errors.Is(err, store.ErrNotMember) {
		t.Fatalf("a user never a member pulled: %v, want ErrNotMember", err)
	}
}

// In a conversation that shares history a member who came back sees
// everything up to where its membership ends, the holes included; once it
// left, nothing after.
func TestRejoinedMemberOfSharedHistory(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	conv, _ := rejoinedIn(t, st, true)
	all := func(n int64) []int64 {
		var out []int64
		for s := int64(1); s <= n; s++ {
			out = append(out, s)
		}
		return out
	}
	if msgs, more, err := pull(ctx, st, 3, conv, 0, 0, 50); err != nil || !slices.Equal(seqs(msgs), all(15)) || more {
		t.Fatalf("pulled %v (more %v, %v), want 1-15", seqs(msgs), more, err)
	}
	if _, err := st.RemoveMembers(ctx, conv, []int64{3}); err != nil {
		t.Fatal(err)
	}
	sendStored(t, st, conv, 1, 2)
	if msgs, more, err := pull(ctx, st, 3, conv, 0, 1<<40, 50); err != nil || !slices.Equal(seqs(msgs), all(15)) || more {
		t.Fatalf("after leaving: pulled %v (more %v, %v), want 1-15", seqs(msgs), more, err)
	}
}

func seqs(msgs []wire.Message) []int64 {
	out := make([]int64, len(msgs))
	for i, m := range msgs {
		out[i] = m.ConvSeq
	}
	return out
}

// Read positions of a member who came back: read_count counts it among the
// recipients of the messages of every one of its memberships (and only of
// those), read by its read_seq; the summary's unread counts only its
// current membership after its read position.
func TestRejoinedMemberReadCountsAndUnread(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	conv, _ := rejoined(t, st)
	if _, _, err := st.MarkRead(ctx, 2, conv, 15); err != nil {
		t.Fatal(err)
	}
	// 3 read its first membership to 3 and saw the rest of it unread.
	if rs, _, err := st.MarkRead(ctx, 3, conv, 3); err != nil || rs != 3 {
		t.Fatalf("mark read: read_seq %d (%v), want 3", rs, err)
	}
	counts := func(want map[int64][2]int64) {
		t.Helper()
		for seq := int64(1); seq <= 15; seq++ {
			read, members, err := st.ReadCount(ctx, conv, seq)
			if err != nil {
				t.Fatal(err)
			}
			if got := [2]int64{read, members}; got != want[seq] {
				t.Errorf("message %d: read by %d of %d, want %d of %d", seq, read, members, want[seq][0], want[seq][1])
			}
		}
	}
	// The sender (1) is never counted; 2 read everything.
	counts(map[int64][2]int64{
		1: {2, 2}, 2: {2, 2}, 3: {2, 2}, 4: {1, 2},
		5: {1, 1}, 6: {1, 1}, 7: {1, 1}, 8: {1, 1},
		9: {1, 2}, 10: {1, 2},
		11: {1, 1}, 12: {1, 1}, 13: {1, 1},
		14: {1, 2}, 15: {1, 2},
	})
	// Unread from the summary: the conversation is in it only with
	// something unread, and the read position it gives agrees.
	unread := func(want int64) {
		t.Helper()
		rows, _, err := st.Summary(ctx, 3, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		var got store.ConvSummary
		for _, r := range rows {
			if r.ConvID == conv {
				got = r
			}
		}
		if got.Unread != want || (want > 0 && got.LastSeq-got.ReadSeq != want) {
			t.Fatalf("summary of uid 3: %+v, want unread %d", rows, want)
		}
	}
	unread(2) // 14 and 15: not 4, 9, 10 of its earlier memberships
	if rs, _, err := st.MarkRead(ctx, 3, conv, 14); err != nil || rs != 14 {
		t.Fatalf("mark read: read_seq %d (%v), want 14", rs, err)
	}
	unread(1)
	counts(map[int64][2]int64{
		1: {2, 2}, 2: {2, 2}, 3: {2, 2}, 4: {2, 2},
		5: {1, 1}, 6: {1, 1}, 7: {1, 1}, 8: {1, 1},
		9: {2, 2}, 10: {2, 2},
		11: {1, 1}, 12: {1, 1}, 13: {1, 1},
		14: {2, 2}, 15: {1, 2},
	})
	// A read past the end is capped at the last message.
	if rs, _, err := st.MarkRead(ctx, 3, conv, 99); err != nil || rs != 15 {
		t.Fatalf("mark read past the end: read_seq %d (%v), want 15", rs, err)
	}
	unread(0)
	if _, _, err := st.MarkRead(ctx, 9, conv, 1); !errors.Is(err, store.ErrNotMember) {
		t.Fatalf("a user never a member marked read: %v, want ErrNotMember", err)
	}
}

// Visible names a direct conversation's other member (the read receipt goes
// to it), for each side, and no peer in a group.
func TestVisiblePeerOfDirectConversation(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	direct, _, err := st.CreateConversation(ctx, store.KindDirect, []int64{3, 4}, false)
	if err != nil {
		t.Fatal(err)
	}
	group, _, err := st.CreateConversation(ctx, store.KindGroup, []int64{3, 4, 5}, false)
	if err != nil {
		t.Fatal(err)
	}
	for uid, peer := range map[int64]int64{3: 4, 4: 3} {
		v, err := st.Visible(ctx, uid, direct)
		if err != nil {
			t.Fatal(err)
		}
		if v.PeerUID != peer {
			t.Fatalf("direct: uid %d sees peer %d, want %d", uid, v.PeerUID, peer)
		}
	}
	v, err := st.Visible(ctx, 3, group)
	if err != nil {
		t.Fatal(err)
	}
	if v.PeerUID != 0 {
		t.Fatalf("group: peer %d, want none", v.PeerUID)
	}
}

// pull is st.Pull with its result unpacked.
func pull(ctx context.Context, st *store.Store, uid, conv, after, before int64, limit int) ([]wire.Message, bool, error) {
	r, err := st.Pull(ctx, uid, conv, after, before, limit)
	return r.Messages, r.HasMore, err
}
