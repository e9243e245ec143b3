package fanout

import (
	"math"
	"slices"
	"testing"

	"github.com/inboxd/inboxd/internal/store"
)

func TestHistoryMembersAt(t *testing.T) {
	const open = math.MaxInt64
	h := newHistory([]store.MemberSpan{
		{UID: 1, After: 0, Until: open},
		{UID: 2, After: 0, Until: 5},    // left at 5
		{UID: 3, After: 0, Until: 2},    // left at 2 ...
		{UID: 3, After: 5, Until: open}, // ... and came back at 5
		{UID: 4, After: 5, Until: open}, // joined at 5
		{UID: 6, After: 9, Until: 12},
	})
	for _, tc := range []struct {
		seq  int64
		want []int64
	}{
		{1, []int64{1, 2, 3}},
		{2, []int64{1, 2, 3}},
		{3, []int64{1, 2}},
		{5, []int64{1, 2}},
		{6, []int64{1, 3, 4}},
		{9, []int64{1, 3, 4}},
		{10, []int64{1, 3, 4, 6}},
		{12, []int64{1, 3, 4, 6}},
		{13, []int64{1, 3, 4}},
		{1 << 40, []int64{1, 3, 4}},
	} {
		if got := h.membersAt(tc.seq); !slices.Equal(got, tc.want) {
			t.Errorf("members at %d: %v, want %v", tc.seq, got, tc.want)
		}
	}
	// One list per stretch between membership changes, shared.
	if a, b := h.membersAt(6), h.membersAt(9); &a[0] != &b[0] {
		t.Error("seqs 6 and 9 (no change between) got separate lists")
	}
	if got := newHistory(nil).membersAt(3); got == nil || len(got) != 0 {
		t.Errorf("no spans: %v, want an empty list", got)
	}
}

// The cache evicts only before a batch looks at it: a batch with more
// conversations than the cache holds keeps every list it loaded.
func TestMemberCacheKeepsABatchsLists(t *testing.T) {
	c := newMemberCache(2)
	c.put(100, 1, []int64{9})
	c.makeRoom(3)
	for conv := int64(1); conv <= 3; conv++ {
		c.put(conv, 1, []int64{conv})
	}
	for conv := int64(1); conv <= 3; conv++ {
		if !c.isMember(conv, conv) {
			t.Errorf("conversation %d lost its list within the batch", conv)
		}
	}
	if c.fresh(100, 1) {
		t.Error("makeRoom kept an older list beyond the bound")
	}
}
