package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/wire"
)

// ErrNotMember is returned when a user acts on a conversation it is not (or
// was never) a member of.
var ErrNotMember = errors.New("not a member of the conversation")

// ConvSummary is one conversation of a login summary.
type ConvSummary struct {
	ConvID        int64
	Unread        int64
	LastSeq       int64
	ReadSeq       int64
	LastMsgID     int64
	LastSenderUID int64
	LastPreview   string
	LastAt        time.Time
}

// SummaryLimit is the most conversations of one summary page.
const SummaryLimit = 200

// The summary is paged by keyset on the last message's msg_id, descending:
// msg_id is unique and time-ordered, so pages neither repeat nor skip a
// conversation, whatever ties there are in time. A conversation whose last
// message changes while a client pages moves to the front (the client
// learns of it from the message itself).
const sqlSummary = `
	SELECT c.conv_id, c.last_seq - GREATEST(m.read_seq, m.joined_seq) AS unread, c.last_seq,
	       GREATEST(m.read_seq, m.joined_seq), lm.msg_id, lm.sender_uid, left(lm.body, 80), lm.created_at
	FROM conv_member m
	JOIN conversation c ON c.conv_id = m.conv_id
	CROSS JOIN LATERAL (
		SELECT msg_id, sender_uid, body, created_at FROM msg_content
		WHERE conv_id = c.conv_id AND conv_seq = c.last_seq) lm
	WHERE m.uid = $1 AND m.left_seq IS NULL AND c.last_seq > GREATEST(m.read_seq, m.joined_seq)
	  AND ($2::bigint = 0 OR lm.msg_id < $2::bigint)
	ORDER BY lm.msg_id DESC
	LIMIT $3`

// Summary returns a page of uid's conversations with anything unread,
// newest last message first: at most limit of them whose last msg_id is
// below beforeMsgID (0: the first page); more says whether more follow
// (ask with the last one's LastMsgID). unread = last_seq - read_seq (a
// sender's read_seq rises with each of its own messages, so its own
// messages count as read; messages before it joined are not counted).
// Served by the indexes conv_member_by_uid, conversation's primary key and
// msg_content (conv_id, conv_seq).
func (s *Store) Summary(ctx context.Context, uid, beforeMsgID int64, limit int) (_ []ConvSummary, more bool, _ error) {
	if limit <= 0 || limit > SummaryLimit {
		limit = SummaryLimit
	}
	rows, err := s.Pool.Query(ctx, sqlSummary, uid, beforeMsgID, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("store: summary: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ConvSummary, error) {
		var c ConvSummary
		err := r.Scan(&c.ConvID, &c.Unread, &c.LastSeq, &c.ReadSeq, &c.LastMsgID, &c.LastSenderUID, &c.LastPreview, &c.LastAt)
		return c, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: summary: %w", err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// ExplainSummary returns the query plan of Summary's first page (for
// tests and docs).
func (s *Store) ExplainSummary(ctx context.Context, uid int64) (string, error) {
	rows, err := s.Pool.Query(ctx, "EXPLAIN "+sqlSummary, uid, 0, SummaryLimit+1)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out, nil
}

// Visibility is what a user may see of a conversation.
type Visibility struct {
	Kind     int
	FromSeq  int64 // first visible conv_seq
	UpToSeq  int64 // last visible conv_seq (the conversation's last_seq, or where the user left)
	ReadSeq  int64
	Members  []int64
	IsMember bool  // currently a member
	PeerUID  int64 // direct conversations: the other member
}

// Visible returns what uid may see of conv: members see messages after they
// joined (all of them when the conversation shares history), former members
// up to where they left. ErrNotMember when uid was never a member.
func (s *Store) Visible(ctx context.Context, uid, conv int64) (Visibility, error) {
	var v Visibility
	var joined, lastSeq int64
	var left *int64
	var share bool
	err := s.Pool.QueryRow(ctx, `
		SELECT c.kind, c.last_seq, c.share_history, m.joined_seq, m.left_seq, m.read_seq
		FROM conversation c JOIN conv_member m ON m.conv_id = c.conv_id AND m.uid = $1
		WHERE c.conv_id = $2`, uid, conv).Scan(&v.Kind, &lastSeq, &share, &joined, &left, &v.ReadSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return v, ErrNotMember
	}
	if err != nil {
		return v, fmt.Errorf("store: visibility: %w", err)
	}
	v.FromSeq = joined + 1
	if share {
		v.FromSeq = 1
	}
	v.UpToSeq, v.IsMember = lastSeq, left == nil
	if left != nil {
		v.UpToSeq = *left
	}
	if v.Kind == KindDirect {
		_ = s.Pool.QueryRow(ctx, `SELECT uid FROM conv_member WHERE conv_id = $1 AND uid <> $2`, conv, uid).Scan(&v.PeerUID)
	}
	return v, nil
}

// MaxPull bounds one conversation pull.
const MaxPull = 50

// Pull reads up to limit messages of conv visible to uid, in ascending
// conv_seq: the first ones after afterSeq, or, when beforeSeq > 0, the last
// ones before it. hasMore says more remain in that direction.
func (s *Store) Pull(ctx context.Context, uid, conv, afterSeq, beforeSeq int64, limit int) ([]wire.Message, bool, error) {
	if limit <= 0 || limit > MaxPull {
		limit = MaxPull
	}
	v, err := s.Visible(ctx, uid, conv)
	if err != nil {
		return nil, false, err
	}
	var q string
	var lo, hi int64
	if beforeSeq > 0 {
		lo, hi = v.FromSeq, min(beforeSeq-1, v.UpToSeq)
		q = `SELECT msg_id, conv_seq, sender_uid, kind, body, created_at FROM msg_content
		     WHERE conv_id = $1 AND conv_seq BETWEEN $2 AND $3 ORDER BY conv_seq DESC LIMIT $4`
	} else {
		lo, hi = max(afterSeq+1, v.FromSeq), v.UpToSeq
		q = `SELECT msg_id, conv_seq, sender_uid, kind, body, created_at FROM msg_content
		     WHERE conv_id = $1 AND conv_seq BETWEEN $2 AND $3 ORDER BY conv_seq LIMIT $4`
	}
	if lo > hi {
		return nil, false, nil
	}
	rows, err := s.Pool.Query(ctx, q, conv, lo, hi, limit+1)
	if err != nil {
		return nil, false, fmt.Errorf("store: pull: %w", err)
	}
	msgs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (wire.Message, error) {
		m := wire.Message{ConvID: conv}
		var kind int16
		var at time.Time
		err := r.Scan(&m.MsgID, &m.ConvSeq, &m.SenderUID, &kind, &m.Text, &at)
		m.Kind, m.CreatedAtMs = uint32(kind), at.UnixMilli()
		return m, err
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: pull: %w", err)
	}
	more := len(msgs) > limit
	if more {
		msgs = msgs[:limit]
	}
	if beforeSeq > 0 {
		slices.Reverse(msgs) // always ascending; has_more: older ones remain
	}
	return msgs, more, nil
}

// MarkRead raises uid's read_seq in conv to upTo (capped at what uid can
// see; never lowered) and returns the resulting read_seq and visibility.
func (s *Store) MarkRead(ctx context.Context, uid, conv, upTo int64) (int64, Visibility, error) {
	v, err := s.Visible(ctx, uid, conv)
	if err != nil {
		return 0, v, err
	}
	upTo = min(upTo, v.UpToSeq)
	var readSeq int64
	err = s.Pool.QueryRow(ctx, `
		UPDATE conv_member SET read_seq = GREATEST(read_seq, $3)
		WHERE conv_id = $1 AND uid = $2 RETURNING read_seq`, conv, uid, upTo).Scan(&readSeq)
	if err != nil {
		return 0, v, fmt.Errorf("store: mark read: %w", err)
	}
	return readSeq, v, nil
}

// ReadCount returns, for message convSeq of conv, how many members other
// than its sender have read it and how many can see it.
func (s *Store) ReadCount(ctx context.Context, conv, convSeq int64) (read, members int64, err error) {
	err = s.Pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE m.read_seq >= $2), count(*)
		FROM conv_member m JOIN msg_content c ON c.conv_id = m.conv_id AND c.conv_seq = $2
		WHERE m.conv_id = $1 AND m.uid <> c.sender_uid AND m.joined_seq < $2
		  AND (m.left_seq IS NULL OR m.left_seq >= $2)`, conv, convSeq).Scan(&read, &members)
	if err != nil {
		return 0, 0, fmt.Errorf("store: read count: %w", err)
	}
	return read, members, nil
}

// ConvKinds returns the kind of each conversation (kinds never change).
func (s *Store) ConvKinds(ctx context.Context, convs []int64) (map[int64]int, error) {
	rows, err := s.Pool.Query(ctx, `SELECT conv_id, kind FROM conversation WHERE conv_id = ANY($1::bigint[])`, convs)
	if err != nil {
		return nil, fmt.Errorf("store: conversation kinds: %w", err)
	}
	out := map[int64]int{}
	var id int64
	var kind int
	_, err = pgx.ForEachRow(rows, []any{&id, &kind}, func() error { out[id] = kind; return nil })
	return out, err
}
