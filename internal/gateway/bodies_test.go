package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/wire"
)

// A body read from Postgres while its erasure is announced (the drop comes
// between the read and the cache's put) is not cached: the next page reads
// the tombstone, not the erased text, for as long as the gateway runs.
func TestBodyErasedDuringItsLoadIsNotCached(t *testing.T) {
	ctx := context.Background()
	st := testenv.Store(t)
	conv, _, err := st.CreateConversation(ctx, store.KindDirect, []int64{1, 2}, false)
	if err != nil {
		t.Fatal(err)
	}
	id := ids.AtTime(time.Now())
	if _, err := st.Pool.Exec(ctx, `
		INSERT INTO msg_content (msg_id, conv_id, conv_seq, sender_uid, sender_device, client_msg_id, kind, body, created_at)
		VALUES ($1, $2, 1, 1, 'd', 'c1', 1, 'secret', now())`, id, conv); err != nil {
		t.Fatal(err)
	}
	var c *bodyCache
	erase := true
	c = newBodyCache(100, func(ctx context.Context, ids, convs []int64) (map[int64]store.Body, map[int64]int64, error) {
		bodies, horizons, err := st.BodiesAndHorizons(ctx, ids, convs)
		if erase {
			// The user's deletion commits and is announced after this
			// read: the gateway drops the body before the load returns.
			erase = false
			if _, err := st.TombstoneBodies(ctx, ids); err != nil {
				t.Error(err)
			}
			c.drop(ids)
		}
		return bodies, horizons, err
	})
	read := func() store.Body {
		var got store.Body
		if _, err := c.fill(ctx, 1, func(int) int64 { return id }, func(_ int, b store.Body, found bool) {
			if !found {
				t.Fatal("body not found")
			}
			got = b
		}, nil); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if b := read(); b.Text != "secret" {
		t.Fatalf("the read that raced the erasure: %+v", b)
	}
	if b := read(); b.Kind != wire.KindDeleted || b.Text != "" {
		t.Fatalf("after the erasure was announced the cache served %+v, want the tombstone", b)
	}
	// Without a drop in between, a loaded body is cached.
	if b := read(); b.Kind != wire.KindDeleted {
		t.Fatalf("third read %+v", b)
	}
	if _, ok := c.shard(id).m[id]; !ok {
		t.Fatal("a body loaded without a drop meanwhile was not cached")
	}
}
