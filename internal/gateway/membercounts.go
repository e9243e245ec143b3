package gateway

import (
	"context"
	"sync"
	"time"
)

// memberCounts caches conversations' member counts: the price of a send in
// inbox entries (one per member), asked for every send without a Postgres
// query each. An entry is kept memberCountTTL, so a membership change is
// priced right at most that long after it (the old count meanwhile: a
// group that grew is underpriced by the members added, for at most
// memberCountTTL of the sender's sends; one that shrank is overpriced).
// Conversations that do not exist are cached too (count 0), so sends to
// made-up conv_ids do not each cost a query.
type memberCounts struct {
	lookup func(ctx context.Context, conv int64) (int, error)
	ttl    time.Duration
	max    int

	mu sync.Mutex
	m  map[int64]memberCount
}

type memberCount struct {
	n  int
	at time.Time
}

const (
	// memberCountTTL bounds how long a membership change may be mispriced.
	memberCountTTL = 5 * time.Second
	// memberCountEntries bounds the cache (about 40 bytes an entry).
	memberCountEntries = 1 << 16
)

func newMemberCounts(lookup func(context.Context, int64) (int, error), ttl time.Duration, max int) *memberCounts {
	return &memberCounts{lookup: lookup, ttl: ttl, max: max, m: make(map[int64]memberCount)}
}

// members returns conv's member count, from the cache while fresh.
func (mc *memberCounts) members(ctx context.Context, conv int64) (int, error) {
	now := time.Now()
	mc.mu.Lock()
	e, ok := mc.m[conv]
	mc.mu.Unlock()
	if ok && now.Sub(e.at) < mc.ttl {
		return e.n, nil
	}
	n, err := mc.lookup(ctx, conv)
	if err != nil {
		return 0, err
	}
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if len(mc.m) >= mc.max {
		mc.evictLocked(now)
	}
	mc.m[conv] = memberCount{n: n, at: now}
	return n, nil
}

// evictLocked makes room: expired entries go, and if that is not enough,
// an eighth of the rest, chosen by map order (random).
func (mc *memberCounts) evictLocked(now time.Time) {
	for k, e := range mc.m {
		if now.Sub(e.at) >= mc.ttl {
			delete(mc.m, k)
		}
	}
	drop := len(mc.m) - mc.max + max(1, mc.max/8)
	for k := range mc.m {
		if drop <= 0 {
			break
		}
		delete(mc.m, k)
		drop--
	}
}
