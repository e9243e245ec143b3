package store_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
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
