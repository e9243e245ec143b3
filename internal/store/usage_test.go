package store_test

import (
	"context"
	"testing"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/testenv"
)

// A partitioned table (as retention partitions msg_content and
// inbox_archive) is one line of the usage, with its partitions' rows and
// bytes summed; its partitions have no line of their own. A plain table
// counts its own.
func TestTablesUsageSumsPartitions(t *testing.T) {
	st := testenv.Store(t)
	ctx := context.Background()
	for _, q := range []string{
		`CREATE TABLE parted (id bigint NOT NULL, at timestamptz NOT NULL) PARTITION BY RANGE (at)`,
		`CREATE TABLE parted_a PARTITION OF parted FOR VALUES FROM ('2026-01-01') TO ('2026-02-01')`,
		`CREATE TABLE parted_b PARTITION OF parted FOR VALUES FROM ('2026-02-01') TO ('2026-03-01')`,
		`INSERT INTO parted SELECT g, '2026-01-15'::timestamptz + (g % 40) * interval '1 day' FROM generate_series(1, 3000) g`,
		`INSERT INTO send_reject (sender_uid, client_msg_id, code, message) VALUES (1, 'a', 5, 'x'), (1, 'b', 5, 'x')`,
	} {
		if _, err := st.Pool.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	u, err := st.TablesUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.TableUsage{}
	for _, x := range u {
		got[x.Name] = x
	}
	if _, ok := got["parted_a"]; ok {
		t.Fatalf("a partition has a line of its own: %+v", u)
	}
	var a, b int64
	if err := st.Pool.QueryRow(ctx, `SELECT pg_total_relation_size('parted_a'), pg_total_relation_size('parted_b')`).Scan(&a, &b); err != nil {
		t.Fatal(err)
	}
	if p := got["parted"]; p.Entries != 3000 || p.Bytes != a+b || a == 0 || b == 0 {
		t.Fatalf("parted: %+v; want 3000 entries and %d bytes (its partitions')", p, a+b)
	}
	if r := got["send_reject"]; r.Entries != 2 || r.Bytes == 0 || r.Oldest == nil {
		t.Fatalf("send_reject: %+v; want 2 entries, its bytes and its oldest", r)
	}
	if m := got["msg_content"]; m.Entries != 0 || m.Oldest != nil || m.Bytes == 0 {
		t.Fatalf("empty msg_content: %+v; want 0 entries, no oldest, the bytes of its empty indexes", m)
	}
}
