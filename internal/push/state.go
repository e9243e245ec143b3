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

// sqlUnread is the user's unread count as the summary computes it
// (store.Summary: last_seq − GREATEST(read_seq, joined_seq) over the
// current memberships), in all and in one conversation.
const sqlUnread = `
	SELECT coalesce(sum(c.last_seq - GREATEST(m.read_seq, m.joined_seq)), 0),
	       coalesce(sum(c.last_seq - GREATEST(m.read_seq, m.joined_seq)) FILTER (WHERE m.conv_id = $2), 0)
	FROM conv_member m JOIN conversation c ON c.conv_id = m.conv_id
	WHERE m.uid = $1 AND m.left_seq IS NULL AND c.last_seq > GREATEST(m.read_seq, m.joined_seq)`

// decideEvent numbers uid's next event, fills in its counts (and body),
// and records it in push_state in one transaction: covered_seq moves to
// upTo, the collapse window opens at now, and the event waits in pending
// until its publish is acknowledged. It returns the event's JSON.
func decideEvent(ctx context.Context, pool *pgxpool.Pool, ev *Event, upTo uint64, now time.Time, body bool) ([]byte, error) {
	var payload []byte
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var n int64
		err := tx.QueryRow(ctx, `SELECT events FROM push_state WHERE uid = $1 FOR UPDATE`, ev.UID).Scan(&n)
		if err != nil && err != pgx.ErrNoRows {
			return err
		}
		ev.N = n + 1
		ev.ID = EventID(ev.UID, ev.N)
		if err := tx.QueryRow(ctx, sqlUnread, ev.UID, ev.ConvID).Scan(&ev.Unread, &ev.ConvUnread); err != nil {
			return err
		}
		if body {
			var text string
			err := tx.QueryRow(ctx, `SELECT body FROM msg_content WHERE msg_id = $1 AND kind <> $2`, ev.MsgID, kindDeleted).Scan(&text)
			if err != nil && err != pgx.ErrNoRows {
				return err
			}
			ev.Body, ev.BodyTruncated = truncate(text, MaxBody)
		}
		if payload, err = json.Marshal(ev); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `
			INSERT INTO push_state (uid, covered_seq, last_push_at, events, pending) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (uid) DO UPDATE SET covered_seq = GREATEST(push_state.covered_seq, EXCLUDED.covered_seq),
				last_push_at = EXCLUDED.last_push_at, events = EXCLUDED.events, pending = EXCLUDED.pending`,
			ev.UID, int64(upTo), now, ev.N, payload)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("push: record event of uid %d: %w", ev.UID, err)
	}
	return payload, nil
}

// published clears uid's pending event n: JetStream stored it.
func published(ctx context.Context, pool *pgxpool.Pool, uid, n int64) error {
	_, err := pool.Exec(ctx, `UPDATE push_state SET pending = NULL WHERE uid = $1 AND events = $2`, uid, n)
	if err != nil {
		return fmt.Errorf("push: mark event %s published: %w", EventID(uid, n), err)
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
