package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/wire"
)

// NthNewestSeq (a new device's replay cap) answers what the OFFSET query it
// replaced answered, for every n around each user's entry count, on
// entries of several users interleaved with gaps in seq.
func TestNthNewestSeqMatchesOffsetSemantics(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 5))
	counts := map[int64]int{}
	var entries []store.ArchivedEntry
	for seq := uint64(1); seq <= 3000; seq++ {
		if rng.IntN(4) == 0 {
			continue // a gap: another partition's, or a purged entry
		}
		uid := int64(1 + rng.IntN(5))
		if uid == 5 && counts[5] >= 3 {
			uid = 4 // uid 5 has just three entries
		}
		counts[uid]++
		entries = append(entries, store.ArchivedEntry{UID: uid, Seq: seq, MsgID: int64(seq), ConvID: 1, ConvSeq: int64(seq), Kind: 1})
	}
	if err := st.ArchiveEntries(ctx, 0, entries, 3000); err != nil {
		t.Fatal(err)
	}
	old := func(uid int64, n int) (uint64, bool) {
		var seq int64
		err := st.Pool.QueryRow(ctx, `SELECT seq FROM inbox_archive WHERE uid = $1 ORDER BY seq DESC OFFSET $2 LIMIT 1`, uid, n-1).Scan(&seq)
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return uint64(seq), true
	}
	for uid := int64(1); uid <= 6; uid++ { // uid 6 has none
		c := counts[uid]
		for _, n := range []int{1, 2, 3, 4, c / 2, c - 1, c, c + 1, c + 1000} {
			if n < 1 {
				continue
			}
			seq, found, err := st.NthNewestSeq(ctx, uid, n)
			if err != nil {
				t.Fatal(err)
			}
			if wantSeq, wantFound := old(uid, n); seq != wantSeq || found != wantFound {
				t.Fatalf("uid %d (%d entries), n %d: got %d %v, the OFFSET query %d %v", uid, c, n, seq, found, wantSeq, wantFound)
			}
		}
	}
	if _, _, err := st.NthNewestSeq(ctx, 1, 0); err == nil {
		t.Fatal("n = 0 accepted")
	}
}

// An archive page read without bodies and completed with them (SetBody,
// as a gateway does from its cache) is what the device must get: a plain
// message, a deleted user's tombstone, a body retention removed, messages
// at their conversation's horizon (a tombstone among them), and an event;
// a newest page is the page's last entries, in seq order.
func TestArchivePageCompletedWithItsBodies(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	f := &fixture{t: t, st: st}
	c1, c2 := f.conv(2), f.conv(3)
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	m1 := f.send(c1, 1, 4, at)
	m2 := f.send(c2, 1, 3, at.Add(time.Second))
	for _, q := range []string{
		// m1[1] and m2[0]: their sender was deleted (tombstone bodies, as
		// TombstoneBodies writes them); m1[2]: its body is gone
		// (retention); c2 expired up to conv_seq 2.
		fmt.Sprintf(`UPDATE msg_content SET kind = 2, body = '', sender_device = '' WHERE msg_id IN (%d, %d)`, m1[1], m2[0]),
		fmt.Sprintf(`DELETE FROM msg_content WHERE msg_id = %d`, m1[2]),
		fmt.Sprintf(`INSERT INTO conv_expiry (conv_id, expired_seq, expired_msg_id) VALUES (%d, 2, %d)`, c2, m2[1]),
	} {
		if _, err := st.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	f.seq++
	event := store.ArchivedEntry{UID: 1, Seq: uint64(f.seq), ConvID: c1, ConvSeq: 4, Event: 1, Peer: 2, CreatedAtMs: at.UnixMilli()}
	if err := st.ArchiveEntries(ctx, 0, []store.ArchivedEntry{event}, uint64(f.seq)); err != nil {
		t.Fatal(err)
	}

	page, exp, err := st.ArchivePage(ctx, nil, nil, 1, 0, 1<<40, 100)
	if err != nil {
		t.Fatal(err)
	}
	page = testenv.WithBodies(t, st, page)
	if len(page) != 8 {
		t.Fatalf("%d entries, want 8: %+v", len(page), page)
	}
	newest, nexp, err := st.NewestPage(ctx, nil, nil, 1, 0, 1<<40, 3)
	if err != nil {
		t.Fatal(err)
	}
	if newest = testenv.WithBodies(t, st, newest); !reflect.DeepEqual(newest, page[5:]) || !reflect.DeepEqual(nexp, exp) {
		t.Fatalf("newest page of 3\n%+v %v\nwant the page's last 3\n%+v %v", newest, nexp, page[5:], exp)
	}
	first, _, err := st.ArchivePage(ctx, nil, nil, 1, 0, 1<<40, 3)
	if err != nil {
		t.Fatal(err)
	}
	if first = testenv.WithBodies(t, st, first); !reflect.DeepEqual(first, page[:3]) {
		t.Fatalf("page of 3\n%+v\nwant the page's first 3\n%+v", first, page[:3])
	}
	// Every case the test is about, as the device must get it.
	byID := map[int64]wire.Message{}
	for _, m := range page {
		byID[m.MsgID] = m
	}
	if m := byID[m1[0]]; m.Text != "m1" || m.SenderUID != 1 || m.CreatedAtMs != at.UnixMilli() || m.Expired {
		t.Errorf("plain message %+v", m)
	}
	if m := byID[m1[1]]; m.Kind != wire.KindDeleted || m.Expired {
		t.Errorf("tombstone %+v", m)
	}
	if m := byID[m1[2]]; !m.Expired || m.Text != "" {
		t.Errorf("message without its body %+v", m)
	}
	if m := byID[m2[1]]; !m.Expired || m.Text != "" || m.SenderUID != 0 || byID[m2[2]].Expired || len(exp) != 1 || exp[0].ConvID != c2 || exp[0].UpTo != 2 {
		t.Errorf("horizon: %+v, %+v, expired ranges %v", m, byID[m2[2]], exp)
	}
	if m := byID[m2[0]]; !m.Expired || m.Kind != wire.KindDeleted {
		t.Errorf("tombstone at the horizon %+v", m)
	}
	if last := page[len(page)-1]; last.EventType != 1 || last.EventPeer != 2 {
		t.Errorf("event %+v", last)
	}
}
