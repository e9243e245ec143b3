package gateway

import (
	"context"
	"sync"

	"github.com/inboxd/inboxd/internal/store"
)

// bodyCache holds message bodies by msg_id for all connections of a
// gateway: a group message delivered to many devices here is read from
// Postgres once. Bounded by entry count; when full, a shard starts over
// (cheap, and a miss costs one batched query). The same query brings the
// retention horizons of a page's conversations (never cached: a horizon
// only grows, and a stale one would send a client to pull what expired).
type bodyCache struct {
	shards [16]bodyShard
	max    int // per shard
	load   loadFunc
}

// loadFunc reads bodies by msg_id and the retention horizons of convs in
// one round trip (store.BodiesAndHorizons).
type loadFunc func(ctx context.Context, ids, convs []int64) (map[int64]store.Body, map[int64]int64, error)

type bodyShard struct {
	mu sync.Mutex
	m  map[int64]store.Body
	// gen counts the drops and clears of the shard: a body loaded while
	// one came is not cached (the load may have read it before its
	// erasure, and the drop that announced the erasure is past).
	gen uint64
}

func newBodyCache(entries int, load loadFunc) *bodyCache {
	c := &bodyCache{max: max(entries/16, 16), load: load}
	for i := range c.shards {
		c.shards[i].m = make(map[int64]store.Body)
	}
	return c
}

func (c *bodyCache) shard(id int64) *bodyShard { return &c.shards[uint64(id)%16] }

// put caches body unless the shard was dropped from or cleared since gen
// (its generation when the body was found missing).
func (c *bodyCache) put(id int64, body store.Body, gen uint64) {
	s := c.shard(id)
	s.mu.Lock()
	if s.gen == gen {
		if len(s.m) >= c.max {
			clear(s.m)
		}
		s.m[id] = body
	}
	s.mu.Unlock()
}

// drop removes bodies from the cache: a user deletion erased them (the
// next read loads their tombstones).
func (c *bodyCache) drop(ids []int64) {
	for _, id := range ids {
		s := c.shard(id)
		s.mu.Lock()
		delete(s.m, id)
		s.gen++
		s.mu.Unlock()
	}
}

// clear empties the cache: erasures announced while the gateway was cut
// from NATS were missed.
func (c *bodyCache) clear() {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		clear(s.m)
		s.gen++
		s.mu.Unlock()
	}
}

// fill sets the body of every entry from the cache, loading the missing
// ones from Postgres in one round trip with the horizons of convs, which
// it returns. id(i) and set(i, body, found) address the entries; found is
// false for a body Postgres does not have (retention removed it), which is
// not cached.
func (c *bodyCache) fill(ctx context.Context, n int, id func(i int) int64, set func(i int, body store.Body, found bool), convs []int64) (map[int64]int64, error) {
	var missing []int64
	var missingAt []int
	var gens []uint64
	for i := 0; i < n; i++ {
		s := c.shard(id(i))
		s.mu.Lock()
		b, ok := s.m[id(i)]
		gen := s.gen
		s.mu.Unlock()
		if ok {
			set(i, b, true)
		} else {
			missing = append(missing, id(i))
			missingAt = append(missingAt, i)
			gens = append(gens, gen)
		}
	}
	if len(missing) == 0 && len(convs) == 0 {
		return nil, nil
	}
	got, horizons, err := c.load(ctx, missing, convs)
	if err != nil {
		return nil, err
	}
	for k, i := range missingAt {
		b, found := got[missing[k]]
		if found {
			c.put(missing[k], b, gens[k])
		}
		set(i, b, found)
	}
	return horizons, nil
}
