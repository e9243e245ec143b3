package fanout

import (
	"math"
	"slices"

	"github.com/inboxd/inboxd/internal/store"
)

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
	// fanned: every message of the conversation up to this conv_seq is
	// fanned out, as far as this fanout knows (it fanned them out, or
	// looked); 0: unknown (batch.go, the order of inbox entries).
	fanned int64
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
	c.m[conv] = memberList{ver: ver, uids: uids, fanned: c.m[conv].fanned}
}

// fannedTo returns the conv_seq up to which conv's messages are known to be
// fanned out (0: unknown).
func (c *memberCache) fannedTo(conv int64) int64 { return c.m[conv].fanned }

// setFanned records that conv's messages are fanned out up to seq (of a
// conversation whose entry is cached: an evicted one is unknown again).
func (c *memberCache) setFanned(conv, seq int64) {
	if l, ok := c.m[conv]; ok {
		l.fanned = seq
		c.m[conv] = l
	}
}

func (c *memberCache) members(conv int64) []int64 { return c.m[conv].uids }

func (c *memberCache) isMember(conv, uid int64) bool {
	_, ok := slices.BinarySearch(c.m[conv].uids, uid)
	return ok
}

// history answers who the members of one conversation were at a conv_seq,
// from every span of every membership (store.MemberSpans): the recipients
// of a message are the members at its conv_seq, not today's. The member
// set changes only at the seqs in cuts, so it is worked out once per
// stretch of seqs between two cuts.
type history struct {
	spans []store.MemberSpan // by uid; one uid's spans do not overlap
	cuts  []int64            // ascending: the first seq of each span and the first after it
	at    map[int][]int64    // members by the number of cuts <= seq
}

func newHistory(spans []store.MemberSpan) *history {
	h := &history{spans: spans, at: make(map[int][]int64)}
	for _, sp := range spans {
		h.cuts = append(h.cuts, sp.After+1)
		if sp.Until != math.MaxInt64 {
			h.cuts = append(h.cuts, sp.Until+1)
		}
	}
	slices.Sort(h.cuts)
	h.cuts = slices.Compact(h.cuts)
	return h
}

// membersAt returns the members at seq, ascending.
func (h *history) membersAt(seq int64) []int64 {
	stretch, _ := slices.BinarySearch(h.cuts, seq+1)
	if l, ok := h.at[stretch]; ok {
		return l
	}
	l := []int64{}
	for _, sp := range h.spans {
		if sp.After < seq && seq <= sp.Until {
			l = append(l, sp.UID)
		}
	}
	h.at[stretch] = l
	return l
}
