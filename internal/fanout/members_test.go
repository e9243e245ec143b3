package fanout

import "testing"

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
