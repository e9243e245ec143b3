package fanout

import "slices"

// memberCache holds the member lists of recently active conversations of one
// partition (one goroutine: no locking). An entry is valid for the
// member_ver it was read at; every batch locks its conversation rows and
// compares member_ver, so a membership change invalidates the entry before
// the next message of that conversation is fanned out.
type memberCache struct {
	max int
	m   map[int64]memberList
}

type memberList struct {
	ver  int64
	uids []int64 // ascending
}

func newMemberCache(max int) *memberCache {
	return &memberCache{max: max, m: make(map[int64]memberList)}
}

// makeRoom makes room for the lists of a batch of n conversations. It is
// the only eviction, and it runs before the batch looks at the cache: a
// list the batch relies on (to check a sender, to publish) is never evicted
// halfway through it. Bounded memory: start over rather than track recency;
// a miss costs one indexed query per batch.
func (c *memberCache) makeRoom(n int) {
	if len(c.m)+n > c.max {
		clear(c.m)
	}
}

// fresh reports whether conv's cached list is at version ver.
func (c *memberCache) fresh(conv, ver int64) bool {
	l, ok := c.m[conv]
	return ok && l.ver == ver
}

func (c *memberCache) put(conv, ver int64, uids []int64) {
	c.m[conv] = memberList{ver: ver, uids: uids}
}

func (c *memberCache) members(conv int64) []int64 { return c.m[conv].uids }

func (c *memberCache) isMember(conv, uid int64) bool {
	_, ok := slices.BinarySearch(c.m[conv].uids, uid)
	return ok
}
