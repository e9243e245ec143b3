package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SendKey identifies a send forever: the sender and the id its client chose.
type SendKey struct {
	Sender      int64
	ClientMsgID string
}

// Message is one msg_content row.
type Message struct {
	MsgID        int64
	ConvID       int64
	ConvSeq      int64
	SenderUID    int64
	SenderDevice string
	ClientMsgID  string
	Kind         int
	Body         string
	CreatedAt    time.Time
	FannedOut    bool
}

// Key returns the send key of m.
func (m *Message) Key() SendKey { return SendKey{m.SenderUID, m.ClientMsgID} }

// Reject is one send_reject row: a send refused for good.
type Reject struct {
	Key     SendKey
	Code    int32
	Message string
}

// ConvState is what a fanout batch needs of a locked conversation row.
type ConvState struct {
	Kind      int
	LastSeq   int64
	MemberVer int64
}

// SendLookup is the answer to "which of these sends were seen before".
type SendLookup struct {
	Stored   map[SendKey]*Message
	Rejected map[SendKey]Reject
}

func splitKeys(keys []SendKey) ([]int64, []string) {
	senders := make([]int64, len(keys))
	cmids := make([]string, len(keys))
	for i, k := range keys {
		senders[i], cmids[i] = k.Sender, k.ClientMsgID
	}
	return senders, cmids
}

const (
	sqlLockConversations = `
		SELECT conv_id, kind, last_seq, member_ver FROM conversation
		WHERE conv_id = ANY($1::bigint[]) ORDER BY conv_id FOR UPDATE`
	sqlFindStored = `
		SELECT m.msg_id, m.conv_id, m.conv_seq, m.sender_uid, m.sender_device,
		       m.client_msg_id, m.kind, m.body, m.created_at, m.fanned_out
		FROM unnest($1::bigint[], $2::text[]) AS k(sender, cmid)
		JOIN msg_content m ON m.sender_uid = k.sender AND m.client_msg_id = k.cmid`
	// The batch's conversations' messages that are stored but not fanned
	// out, above the newest one that is: sends another fanout committed
	// and has not published yet (it is stuck on NATS, or dead and its
	// sends not redelivered yet). Per conversation: one
	// backward step of the (conv_id, conv_seq) index per msg_content
	// partition for the floor, one range read above it. OFFSET 0 keeps the
	// lateral subquery a nested loop: flattened, the planner chose a scan
	// of the whole table for NOT fanned_out (5 ms at 50,000 rows, growing
	// with it; this way 1.5 ms cold for three conversations, whatever the
	// table's size).
	sqlFindUnfanned = `
		SELECT m.msg_id, m.conv_id, m.conv_seq, m.sender_uid, m.sender_device,
		       m.client_msg_id, m.kind, m.body, m.created_at, m.fanned_out
		FROM unnest($1::bigint[]) AS c(id)
		CROSS JOIN LATERAL (
			SELECT u.* FROM msg_content u
			WHERE u.conv_id = c.id AND NOT u.fanned_out
			  AND u.conv_seq > COALESCE((SELECT f.conv_seq FROM msg_content f
			                             WHERE f.conv_id = c.id AND f.fanned_out
			                             ORDER BY f.conv_seq DESC LIMIT 1), 0)
			OFFSET 0) m
		ORDER BY m.conv_id, m.conv_seq`
	sqlFindRejected = `
		SELECT r.sender_uid, r.client_msg_id, r.code, r.message
		FROM unnest($1::bigint[], $2::text[]) AS k(sender, cmid)
		JOIN send_reject r ON r.sender_uid = k.sender AND r.client_msg_id = k.cmid`
)

// SendTx is a fanout batch's transaction, in two round trips where
// pgx.BeginFunc takes four: BEGIN goes in the pipeline of the first
// statements (the locks and the lookups) and COMMIT in that of the writes.
// On this 2-core host a loopback round trip to Postgres costs 0.2-0.4 ms of
// wake-ups, and the transaction is on the path of every live message.
type SendTx struct {
	conn *pgxpool.Conn
	// Convs are the batch's conversations, locked; Lookup its sends stored
	// or rejected before.
	Convs  map[int64]ConvState
	Lookup SendLookup
	done   bool // committed: nothing to roll back
}

// RunSendTx runs fn in a SendTx that holds the batch's conversations
// locked (in conv_id order, so concurrent writers cannot deadlock). fn ends
// with tx.Commit; an error, or no Commit, rolls back.
func RunSendTx(ctx context.Context, pool *pgxpool.Pool, convIDs []int64, keys []SendKey, fn func(tx *SendTx) error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("store: send batch: %w", err)
	}
	tx := &SendTx{conn: conn}
	defer tx.end()
	if tx.Convs, tx.Lookup, err = beginBatch(ctx, conn, convIDs, keys); err != nil {
		return err
	}
	return fn(tx)
}

// end rolls back what was not committed and gives the connection back (a
// connection left inside a transaction is closed by the pool instead).
func (tx *SendTx) end() {
	if !tx.done && tx.conn.Conn().PgConn().TxStatus() != 'I' {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := tx.conn.Exec(ctx, "ROLLBACK"); err != nil {
			_ = tx.conn.Conn().Close(ctx)
		}
		cancel()
	}
	tx.conn.Release()
}

// ActiveMembers is the package's ActiveMembers inside the transaction.
func (tx *SendTx) ActiveMembers(ctx context.Context, convIDs []int64) (map[int64][]int64, error) {
	return ActiveMembers(ctx, tx.conn, convIDs)
}

// Commit writes what the batch decided and commits, in one round trip:
// the new msg_content rows, each conversation's new last_seq, the senders'
// read_seq (their own messages count as read) and the rejects.
func (tx *SendTx) Commit(ctx context.Context, msgs []*Message, lastSeq map[int64]int64, rejects []Reject) error {
	b := commitBatch(msgs, lastSeq, rejects)
	b.Queue("COMMIT")
	br := tx.conn.SendBatch(ctx, b)
	defer br.Close()
	for range b.Len() - 1 {
		if _, err := br.Exec(); err != nil {
			return fmt.Errorf("store: commit batch: %w", err)
		}
	}
	tag, err := br.Exec()
	if err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	// A transaction that failed earlier answers COMMIT with ROLLBACK.
	if tag.String() != "COMMIT" {
		return fmt.Errorf("store: commit: the transaction was rolled back (%s)", tag)
	}
	tx.done = true
	return nil
}

// beginBatch opens the transaction, locks the conversations of a fanout
// batch and looks up which sends of the batch were stored or rejected
// before, in one round trip.
func beginBatch(ctx context.Context, q *pgxpool.Conn, convIDs []int64, keys []SendKey) (map[int64]ConvState, SendLookup, error) {
	senders, cmids := splitKeys(keys)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(sqlLockConversations, convIDs)
	b.Queue(sqlFindStored, senders, cmids)
	b.Queue(sqlFindRejected, senders, cmids)
	br := q.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, SendLookup{}, fmt.Errorf("store: begin: %w", err)
	}

	convs := make(map[int64]ConvState, len(convIDs))
	rows, err := br.Query()
	if err != nil {
		return nil, SendLookup{}, fmt.Errorf("store: lock conversations: %w", err)
	}
	for rows.Next() {
		var id int64
		var c ConvState
		if err := rows.Scan(&id, &c.Kind, &c.LastSeq, &c.MemberVer); err != nil {
			return nil, SendLookup{}, err
		}
		convs[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, SendLookup{}, fmt.Errorf("store: lock conversations: %w", err)
	}
	lk, err := scanLookup(br)
	if err != nil {
		return nil, SendLookup{}, err
	}
	return convs, lk, br.Close()
}

// Unfanned returns the messages of convIDs that are stored and not fanned
// out yet, whosever sends they are, in conv_seq order (sqlFindUnfanned).
// Called in the transaction, after the lock, it sees every commit that
// held the lock before.
func (tx *SendTx) Unfanned(ctx context.Context, convIDs []int64) ([]*Message, error) {
	rows, err := tx.conn.Query(ctx, sqlFindUnfanned, convIDs)
	if err != nil {
		return nil, fmt.Errorf("store: find messages not fanned out: %w", err)
	}
	var out []*Message
	for rows.Next() {
		m := &Message{}
		if err := scanMessage(rows, m); err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: find messages not fanned out: %w", err)
	}
	return out, nil
}

// scanMessage reads a row of sqlFindStored's or sqlFindUnfanned's columns.
func scanMessage(rows pgx.Rows, m *Message) error {
	return rows.Scan(&m.MsgID, &m.ConvID, &m.ConvSeq, &m.SenderUID, &m.SenderDevice,
		&m.ClientMsgID, &m.Kind, &m.Body, &m.CreatedAt, &m.FannedOut)
}

func scanLookup(br pgx.BatchResults) (SendLookup, error) {
	lk := SendLookup{Stored: map[SendKey]*Message{}, Rejected: map[SendKey]Reject{}}
	rows, err := br.Query()
	if err != nil {
		return lk, fmt.Errorf("store: find stored sends: %w", err)
	}
	for rows.Next() {
		m := &Message{}
		if err := scanMessage(rows, m); err != nil {
			return lk, err
		}
		lk.Stored[m.Key()] = m
	}
	if err := rows.Err(); err != nil {
		return lk, fmt.Errorf("store: find stored sends: %w", err)
	}
	rows, err = br.Query()
	if err != nil {
		return lk, fmt.Errorf("store: find rejected sends: %w", err)
	}
	for rows.Next() {
		var r Reject
		if err := rows.Scan(&r.Key.Sender, &r.Key.ClientMsgID, &r.Code, &r.Message); err != nil {
			return lk, err
		}
		lk.Rejected[r.Key] = r
	}
	if err := rows.Err(); err != nil {
		return lk, fmt.Errorf("store: find rejected sends: %w", err)
	}
	return lk, nil
}

// LookupSends answers, outside any batch, whether sends were stored or
// rejected (the gateway asks when JetStream reports a duplicate send).
func (s *Store) LookupSends(ctx context.Context, keys []SendKey) (SendLookup, error) {
	senders, cmids := splitKeys(keys)
	b := &pgx.Batch{}
	b.Queue(sqlFindStored, senders, cmids)
	b.Queue(sqlFindRejected, senders, cmids)
	br := s.Pool.SendBatch(ctx, b)
	defer br.Close()
	lk, err := scanLookup(br)
	if err != nil {
		return lk, err
	}
	return lk, br.Close()
}

// querier is what runs a query: a pool, one of its connections, a pgx.Tx.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ActiveMembers returns the current members of each conversation.
func ActiveMembers(ctx context.Context, q querier, convIDs []int64) (map[int64][]int64, error) {
	rows, err := q.Query(ctx, `
		SELECT conv_id, uid FROM conv_member
		WHERE conv_id = ANY($1::bigint[]) AND left_seq IS NULL ORDER BY conv_id, uid`, convIDs)
	if err != nil {
		return nil, fmt.Errorf("store: members: %w", err)
	}
	out := make(map[int64][]int64, len(convIDs))
	var conv, uid int64
	_, err = pgx.ForEachRow(rows, []any{&conv, &uid}, func() error {
		out[conv] = append(out[conv], uid)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: members: %w", err)
	}
	return out, nil
}

// commitBatch queues the writes of SendTx.Commit.
func commitBatch(msgs []*Message, lastSeq map[int64]int64, rejects []Reject) *pgx.Batch {
	b := &pgx.Batch{}
	if len(msgs) > 0 {
		n := len(msgs)
		var (
			ids, convs, seqs, senders = make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
			devices, cmids, bodies    = make([]string, n), make([]string, n), make([]string, n)
			kinds                     = make([]int16, n)
			created                   = make([]time.Time, n)
		)
		for i, m := range msgs {
			ids[i], convs[i], seqs[i], senders[i] = m.MsgID, m.ConvID, m.ConvSeq, m.SenderUID
			devices[i], cmids[i], bodies[i] = m.SenderDevice, m.ClientMsgID, m.Body
			kinds[i], created[i] = int16(m.Kind), m.CreatedAt
		}
		b.Queue(`
			INSERT INTO msg_content (msg_id, conv_id, conv_seq, sender_uid, sender_device,
			                         client_msg_id, kind, body, created_at)
			SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::text[],
			                     $6::text[], $7::smallint[], $8::text[], $9::timestamptz[])`,
			ids, convs, seqs, senders, devices, cmids, kinds, bodies, created)
		// The sender has read its own message: raise its read_seq.
		b.Queue(`
			UPDATE conv_member c SET read_seq = s.seq
			FROM (SELECT conv, sender, max(seq) AS seq
			      FROM unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS t(conv, sender, seq)
			      GROUP BY conv, sender) s
			WHERE c.conv_id = s.conv AND c.uid = s.sender AND c.read_seq < s.seq`,
			convs, senders, seqs)
	}
	if len(lastSeq) > 0 {
		convs := make([]int64, 0, len(lastSeq))
		seqs := make([]int64, 0, len(lastSeq))
		for c, s := range lastSeq {
			convs, seqs = append(convs, c), append(seqs, s)
		}
		b.Queue(`
			UPDATE conversation c SET last_seq = t.seq
			FROM unnest($1::bigint[], $2::bigint[]) AS t(conv, seq)
			WHERE c.conv_id = t.conv`, convs, seqs)
	}
	if len(rejects) > 0 {
		senders := make([]int64, len(rejects))
		cmids := make([]string, len(rejects))
		codes := make([]int32, len(rejects))
		texts := make([]string, len(rejects))
		for i, r := range rejects {
			senders[i], cmids[i], codes[i], texts[i] = r.Key.Sender, r.Key.ClientMsgID, r.Code, r.Message
		}
		b.Queue(`
			INSERT INTO send_reject (sender_uid, client_msg_id, code, message)
			SELECT * FROM unnest($1::bigint[], $2::text[], $3::int[], $4::text[])
			ON CONFLICT DO NOTHING`, senders, cmids, codes, texts)
	}
	return b
}

// MarkFannedOut records that every inbox entry of these messages is
// written, in one transaction: the entries' rows in inbox_archive, with the
// inbox seqs their PubAcks gave (w.Entries), the fanout's written highs
// (inbox_written.go), and the messages' fanned_out mark. Postgres is the
// store of record of the inbox index from this commit on: an INBOX stream
// that loses these entries (a power cut before its next fsync) is fenced
// above them and they are served from the archive.
func (s *Store) MarkFannedOut(ctx context.Context, msgIDs []int64, w Written) error {
	if len(msgIDs) == 0 && len(w.Entries) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	queueArchiveRows(b, w.Entries)
	queueWritten(b, w)
	if len(msgIDs) > 0 {
		// Rows locked in msg_id order (a batch republishing another
		// fanout's messages marks them too).
		b.Queue(`
			UPDATE msg_content SET fanned_out = true
			WHERE msg_id IN (SELECT msg_id FROM msg_content WHERE msg_id = ANY($1::bigint[]) AND NOT fanned_out ORDER BY msg_id FOR UPDATE)`, msgIDs)
	}
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error { return tx.SendBatch(ctx, b).Close() })
	if err != nil {
		return fmt.Errorf("store: mark fanned out: %w", err)
	}
	return nil
}

// MaxMsgID returns the largest msg_id stored (0 when there is none); a fanout
// seeds its id generator with it so a clock that moved back across a restart
// cannot reissue an id.
func (s *Store) MaxMsgID(ctx context.Context) (int64, error) {
	var id *int64
	if err := s.Pool.QueryRow(ctx, `SELECT max(msg_id) FROM msg_content`).Scan(&id); err != nil {
		return 0, fmt.Errorf("store: max msg_id: %w", err)
	}
	if id == nil {
		return 0, nil
	}
	return *id, nil
}

// IsUniqueViolation reports whether err is a Postgres unique violation
// (another writer stored the same row first).
func IsUniqueViolation(err error) bool {
	var pgErr interface{ SQLState() string }
	return errors.As(err, &pgErr) && pgErr.SQLState() == "23505"
}
