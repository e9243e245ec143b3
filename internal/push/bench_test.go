package push

import (
	"context"
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/streams"
	"github.com/inboxd/inboxd/internal/testenv"
)

// BenchmarkVerdicts measures the pusher's per-entry cost in Postgres: one
// round trip decides a batch of 500 entries (device cursors of 3 devices
// per user, read state, push_state, the message row) among 20,000 users.
// Reported per entry; with -v it logs the query plan (every lookup an
// index scan).
func BenchmarkVerdicts(b *testing.B) {
	st := testenv.Store(b)
	ctx := context.Background()
	const users, batch = 20000, 500
	base := ids.AtTime(time.Now())
	stmts := []string{
		`INSERT INTO conversation (conv_id, kind, last_seq) SELECT g, 2, 10 FROM generate_series(1, $1) g`,
		`INSERT INTO conv_member (conv_id, uid, read_seq) SELECT g, g, 5 FROM generate_series(1, $1) g`,
		`INSERT INTO device_cursor (uid, device, consumer, ack_seq) SELECT g, d::text, 'd_' || g || '_' || d, g FROM generate_series(1, $1) g, generate_series(1, 3) d`,
		`INSERT INTO push_state (uid, covered_seq, last_push_at, events) SELECT g, 0, now() - interval '1 hour', 1 FROM generate_series(1, $1, 2) g`,
	}
	for _, s := range stmts {
		if _, err := st.Pool.Exec(ctx, s, users); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := st.Pool.Exec(ctx, `INSERT INTO msg_content (msg_id, conv_id, conv_seq, sender_uid, sender_device, client_msg_id, kind, body, created_at)
		SELECT $2::bigint + g, g, 10, g + 1, 'x', 'c' || g, 1, 'hello', now() FROM generate_series(1, $1) g`, users, base); err != nil {
		b.Fatal(err)
	}
	if _, err := st.Pool.Exec(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	items := make([]*item, batch)
	for i := range items {
		uid := int64(1 + (i*37)%users)
		items[i] = &item{uid: uid, seq: uint64(uid) + 1, e: streams.Entry{MsgID: base + uid, ConvID: uid, ConvSeq: 10, SenderUID: uid + 1}}
	}
	if testing.Verbose() {
		uids, seqs, convs, cs, msgs := []int64{}, []int64{}, []int64{}, []int64{}, []int64{}
		for _, it := range items {
			uids, seqs, convs, cs, msgs = append(uids, it.uid), append(seqs, int64(it.seq)), append(convs, it.e.ConvID), append(cs, it.e.ConvSeq), append(msgs, it.e.MsgID)
		}
		rows, _ := st.Pool.Query(ctx, "EXPLAIN ANALYZE "+sqlVerdicts, uids, seqs, convs, cs, msgs)
		for rows.Next() {
			var l string
			_ = rows.Scan(&l)
			b.Log(l)
		}
		rows.Close()
	}
	b.ResetTimer()
	for range b.N {
		vs, err := verdicts(ctx, st.Pool, items)
		if err != nil || len(vs) != batch || vs[0].confirmed || vs[0].read || vs[0].gone {
			b.Fatalf("verdicts: %d, %v, %+v", len(vs), err, vs[0])
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/entry")
}
