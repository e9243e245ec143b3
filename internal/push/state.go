package push

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The pusher's Postgres reads and writes: the decision's inputs (device
// cursors, read state, the message's row, the user's push_state) and the
// push_state row of each event (sql/009_push.sql).

// verdict is what Postgres says about one entry at decision time.
type verdict struct {
	confirmed  bool      // a device of the user confirmed the entry's seq
	read       bool      // the user read the conversation up to its conv_seq
	covered    bool      // an event covered the entry already (a redelivery)
	lastPushAt time.Time // the user's last event (zero: none yet)
	gone       bool      // the message row is no more (retention)
	tombstone  bool      // the message's sender was deleted
}

// sqlVerdicts decides a batch of entries in one round trip. "Confirmed"
// is the Postgres mirror of the device cursors (device_cursor, flushed by
// the gateways about every second), not the consumers' ack floors: a
// device's consumer may not exist while it is offline (it is reaped, and
// recreated from the mirror at login), the mirror always does.
const sqlVerdicts = `
	SELECT coalesce((SELECT max(d.ack_seq) FROM device_cursor d WHERE d.uid = e.uid), 0) >= e.seq,
	       coalesce((SELECT m.read_seq >= e.conv_seq FROM conv_member m WHERE m.conv_id = e.conv AND m.uid = e.uid), false),
	       coalesce((SELECT s.covered_seq >= e.seq FROM push_state s WHERE s.uid = e.uid), false),
	       (SELECT s.last_push_at FROM push_state s WHERE s.uid = e.uid),
	       (SELECT c.kind FROM msg_content c WHERE c.msg_id = e.msg)
	FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[]) WITH ORDINALITY AS e(uid, seq, conv, conv_seq, msg, i)
	ORDER BY e.i`

func verdicts(ctx context.Context, pool *pgxpool.Pool, items []*item) ([]verdict, error) {
	uids, seqs, convs, convSeqs, msgs := make([]int64, len(items)), make([]int64, len(items)), make([]int64, len(items)), make([]int64, len(items)), make([]int64, len(items))
	for i, it := range items {
		uids[i], seqs[i], convs[i], convSeqs[i], msgs[i] = it.uid, int64(it.seq), it.e.ConvID, it.e.ConvSeq, it.e.MsgID
	}
	rows, err := pool.Query(ctx, sqlVerdicts, uids, seqs, convs, convSeqs, msgs)
	if err != nil {
		return nil, fmt.Errorf("push: decide %d entries: %w", len(items), err)
	}
	out := make([]verdict, 0, len(items))
	var v verdict
	var last *time.Time
	var kind *int16
	_, err = pgx.ForEachRow(rows, []any{&v.confirmed, &v.read, &v.covered, &last, &kind}, func() error {
		w := v
		if last != nil {
			w.lastPushAt = *last
		}
		w.gone = kind == nil
		w.tombstone = kind != nil && *kind == kindDeleted
		out = append(out, w)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("push: decide %d entries: %w", len(items), err)
	}
	if len(out) != len(items) {
		return nil, fmt.Errorf("push: decide %d entries: %d answers", len(items), len(out))
	}
	return out, nil
}

// sqlUnread is each user's unread count as the summary computes it
// (store.Summary: last_seq − GREATEST(read_seq, joined_seq) over the
// current memberships), in all and in the event's conversation.
const sqlUnread = `
	SELECT e.uid,
	       coalesce(sum(c.last_seq - GREATEST(m.read_seq, m.joined_seq)), 0),
	       coalesce(sum(c.last_seq - GREATEST(m.read_seq, m.joined_seq)) FILTER (WHERE m.conv_id = e.conv), 0)
	FROM unnest($1::bigint[], $2::bigint[]) AS e(uid, conv)
	JOIN conv_member m ON m.uid = e.uid AND m.left_seq IS NULL
	JOIN conversation c ON c.conv_id = m.conv_id AND c.last_seq > GREATEST(m.read_seq, m.joined_seq)
	GROUP BY e.uid`

// decideEvents numbers each user's next event, fills in its counts (and
// body), and records the events in push_state in one transaction (one
// commit for the batch): covered_seq moves to upTo, the user's collapse
// window opens at now, and the event waits in pending until its publish
// is acknowledged. It returns the events' JSON; evs are of distinct users.
func decideEvents(ctx context.Context, pool *pgxpool.Pool, evs []*Event, upTo []uint64, now time.Time, body bool) ([][]byte, error) {
	uids, convs, msgs := make([]int64, len(evs)), make([]int64, len(evs)), make([]int64, len(evs))
	for i, ev := range evs {
		uids[i], convs[i], msgs[i] = ev.UID, ev.ConvID, ev.MsgID
	}
	payloads := make([][]byte, len(evs))
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		n := map[int64]int64{}
		rows, err := tx.Query(ctx, `SELECT uid, events FROM push_state WHERE uid = ANY($1::bigint[]) ORDER BY uid FOR UPDATE`, uids)
		if err != nil {
			return err
		}
		var uid, k, all, conv int64
		if _, err := pgx.ForEachRow(rows, []any{&uid, &k}, func() error { n[uid] = k; return nil }); err != nil {
			return err
		}
		unread := map[int64][2]int64{}
		if rows, err = tx.Query(ctx, sqlUnread, uids, convs); err != nil {
			return err
		}
		if _, err := pgx.ForEachRow(rows, []any{&uid, &all, &conv}, func() error { unread[uid] = [2]int64{all, conv}; return nil }); err != nil {
			return err
		}
		texts := map[int64]string{}
		if body {
			rows, err := tx.Query(ctx, `SELECT msg_id, body FROM msg_content WHERE msg_id = ANY($1::bigint[]) AND kind <> $2`, msgs, kindDeleted)
			if err != nil {
				return err
			}
			var id int64
			var text string
			if _, err := pgx.ForEachRow(rows, []any{&id, &text}, func() error { texts[id] = text; return nil }); err != nil {
				return err
			}
		}
		ns, seqs, pend := make([]int64, len(evs)), make([]int64, len(evs)), make([]string, len(evs))
		for i, ev := range evs {
			ev.N = n[ev.UID] + 1
			ev.ID = EventID(ev.UID, ev.N)
			ev.Unread, ev.ConvUnread = unread[ev.UID][0], unread[ev.UID][1]
			if body {
				ev.Body, ev.BodyTruncated = truncate(texts[ev.MsgID], MaxBody)
			}
			b, err := json.Marshal(ev)
			if err != nil {
				return err
			}
			payloads[i], ns[i], seqs[i], pend[i] = b, ev.N, int64(upTo[i]), string(b)
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO push_state (uid, covered_seq, last_push_at, events, pending)
			SELECT e.uid, e.seq, $3, e.n, e.pending FROM unnest($1::bigint[], $2::bigint[], $4::bigint[], $5::text[]) AS e(uid, seq, n, pending)
			ON CONFLICT (uid) DO UPDATE SET covered_seq = GREATEST(push_state.covered_seq, EXCLUDED.covered_seq),
				last_push_at = EXCLUDED.last_push_at, events = EXCLUDED.events, pending = EXCLUDED.pending`,
			uids, seqs, now, ns, pend)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("push: record %d events: %w", len(evs), err)
	}
	return payloads, nil
}

// published clears the pending events (uid, n) that JetStream stored.
func published(ctx context.Context, pool *pgxpool.Pool, uids, ns []int64) error {
	_, err := pool.Exec(ctx, `
		UPDATE push_state p SET pending = NULL FROM unnest($1::bigint[], $2::bigint[]) AS e(uid, n)
		WHERE p.uid = e.uid AND p.events = e.n`, uids, ns)
	if err != nil {
		return fmt.Errorf("push: mark %d events published: %w", len(uids), err)
	}
	return nil
}

// pendingEvent is an event recorded and perhaps not published.
type pendingEvent struct {
	uid, n  int64
	payload []byte
}

// pendingEvents lists the events recorded and not known to be published
// (a syncer stopped between the two).
func pendingEvents(ctx context.Context, pool *pgxpool.Pool) ([]pendingEvent, error) {
	rows, err := pool.Query(ctx, `SELECT uid, events, pending FROM push_state WHERE pending IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("push: pending events: %w", err)
	}
	var out []pendingEvent
	var p pendingEvent
	_, err = pgx.ForEachRow(rows, []any{&p.uid, &p.n, &p.payload}, func() error {
		out = append(out, pendingEvent{p.uid, p.n, append([]byte(nil), p.payload...)})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("push: pending events: %w", err)
	}
	return out, nil
}
