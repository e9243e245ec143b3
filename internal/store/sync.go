package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/internal/ids"
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
	// ExpiredUpTo: retention removed the messages up to this conv_seq (0:
	// none). At or past LastSeq the last message is gone: LastPreview and
	// LastSenderUID are empty, LastMsgID and LastAt are those of the
	// newest message removed.
	ExpiredUpTo int64
}

// SummaryLimit is the most conversations of one summary page.
const SummaryLimit = 200

// The summary is paged by keyset on the last message's msg_id, descending:
// msg_id is unique and time-ordered, so pages neither repeat nor skip a
// conversation, whatever ties there are in time. A conversation whose last
// message changes while a client pages moves to the front (the client
// learns of it from the message itself).
//
// A conversation whose last message retention removed stays in the
// summary (it still has unread messages, expired ones): it is ordered by
// the newest msg_id removed (conv_expiry), which is its last message's.
var sqlSummary = summaryQuery("$1", "$2::bigint", "$3")

// summaryQuery is the summary's query with its uid, keyset bound and limit
// as SQL expressions: one user's (sqlSummary), or each of a batch of
// logins' (sqlLoginSummaries).
func summaryQuery(uid, before, limit string) string {
	return fmt.Sprintf(`
	SELECT c.conv_id, c.last_seq - GREATEST(m.read_seq, m.joined_seq) AS unread, c.last_seq,
	       GREATEST(m.read_seq, m.joined_seq), coalesce(lm.msg_id, e.expired_msg_id, 0) AS last_id,
	       coalesce(lm.sender_uid, 0), coalesce(left(lm.body, 80), ''), lm.created_at, coalesce(e.expired_seq, 0)
	FROM conv_member m
	JOIN conversation c ON c.conv_id = m.conv_id
	LEFT JOIN conv_expiry e ON e.conv_id = c.conv_id
	LEFT JOIN LATERAL (
		SELECT msg_id, sender_uid, body, created_at FROM msg_content
		WHERE conv_id = c.conv_id AND conv_seq = c.last_seq) lm ON true
	WHERE m.uid = %[1]s AND m.left_seq IS NULL AND c.last_seq > GREATEST(m.read_seq, m.joined_seq)
	  AND (%[2]s = 0 OR coalesce(lm.msg_id, e.expired_msg_id, 0) < %[2]s)
	ORDER BY last_id DESC
	LIMIT %[3]s`, uid, before, limit)
}

// Summary returns a page of uid's conversations with anything unread,
// newest last message first: at most limit of them whose last msg_id is
// below beforeMsgID (0: the first page); more says whether more follow
// (ask with the last one's LastMsgID). unread = last_seq - read_seq (a
// sender's read_seq rises with each of its own messages, so its own
// messages count as read). Only the current membership counts: messages
// before it joined are not counted, those of an earlier membership of a
// member who came back neither (history it can pull, not news), so the
// read position reported is at least joined_seq.
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
	return collectSummary(rows, limit)
}

// collectSummary reads a page of sqlSummary asked with limit+1.
func collectSummary(rows pgx.Rows, limit int) (_ []ConvSummary, more bool, _ error) {
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ConvSummary, error) {
		var c ConvSummary
		return c, scanSummary(r, &c)
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: summary: %w", err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// scanSummary scans a row of summaryQuery into c, after the columns of
// before (a batch's row numbers).
func scanSummary(r pgx.Row, c *ConvSummary, before ...any) error {
	var at *time.Time
	err := r.Scan(append(before, &c.ConvID, &c.Unread, &c.LastSeq, &c.ReadSeq, &c.LastMsgID, &c.LastSenderUID, &c.LastPreview, &at, &c.ExpiredUpTo)...)
	if at != nil {
		c.LastAt = *at
	} else if c.LastMsgID != 0 {
		c.LastAt = ids.Time(c.LastMsgID) // the last message expired: its id tells its time
	}
	return err
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

// Span is a stretch of a conversation's conv_seqs s with After < s <= Until.
type Span struct {
	After int64
	Until int64
}

// Visibility is what a user may see of a conversation.
type Visibility struct {
	Kind     int
	Spans    []Span // the visible conv_seqs: ascending, disjoint, none empty
	UpToSeq  int64  // where the membership ends: the conversation's last_seq, or where the user last left
	ReadSeq  int64
	IsMember bool  // currently a member
	PeerUID  int64 // direct conversations: the other member
	// ExpiredUpTo: retention removed the conversation's messages up to
	// this conv_seq (0: none).
	ExpiredUpTo int64
}

// One row per span of the member's conv_seqs (sqlMemberSeqs; the current
// one ends at last_seq), or one row without a span when it has none. A
// direct conversation's peer comes in the same query: a pull or read of it
// costs one round trip for visibility, not two.
var sqlVisible = `
	SELECT c.kind, c.last_seq, c.share_history, m.left_seq, m.read_seq,
	       lower(r) - 1, coalesce(upper(r) - 1, c.last_seq),
	       CASE WHEN c.kind = ` + strconv.Itoa(KindDirect) + ` THEN
	         (SELECT p.uid FROM conv_member p WHERE p.conv_id = c.conv_id AND p.uid <> $1 LIMIT 1) END,
	       coalesce((SELECT e.expired_seq FROM conv_expiry e WHERE e.conv_id = c.conv_id), 0)
	FROM conversation c
	JOIN conv_member m ON m.conv_id = c.conv_id AND m.uid = $1
	LEFT JOIN LATERAL unnest(` + sqlMemberSeqs + `) AS r ON true
	WHERE c.conv_id = $2
	ORDER BY lower(r)`

// Visible returns what uid may see of conv: the messages delivered to it,
// those of each of its memberships (after it joined, up to where it left,
// if it did; a member who left and came back sees both memberships, not
// what was sent in between), exactly the fanout's recipients. When the
// conversation shares history, everything up to where its membership ends.
// ErrNotMember when uid was never a member.
func (s *Store) Visible(ctx context.Context, uid, conv int64) (Visibility, error) {
	var v Visibility
	rows, err := s.Pool.Query(ctx, sqlVisible, uid, conv)
	if err != nil {
		return v, fmt.Errorf("store: visibility: %w", err)
	}
	var lastSeq int64
	var left, after, until, peer *int64
	var share, found bool
	_, err = pgx.ForEachRow(rows, []any{&v.Kind, &lastSeq, &share, &left, &v.ReadSeq, &after, &until, &peer, &v.ExpiredUpTo}, func() error {
		found = true
		if after != nil && *after < *until { // the current span is empty until a message follows the join
			v.Spans = append(v.Spans, Span{After: *after, Until: *until})
		}
		return nil
	})
	if err != nil {
		return v, fmt.Errorf("store: visibility: %w", err)
	}
	if !found {
		return v, ErrNotMember
	}
	v.UpToSeq, v.IsMember = lastSeq, left == nil
	if left != nil {
		v.UpToSeq = *left
	}
	if share {
		v.Spans = nil
		if v.UpToSeq > 0 {
			v.Spans = []Span{{After: 0, Until: v.UpToSeq}}
		}
	}
	if peer != nil {
		v.PeerUID = *peer
	}
	return v, nil
}

// MaxPull bounds one conversation pull.
const MaxPull = 50

// A pull reads each visible span ($2, $3: afters and untils) through the
// (conv_id, conv_seq) index, at most $4 messages of each, and keeps the
// first (or last) $4 of them: a hole between two memberships costs
// nothing, however long.
const (
	sqlPullAfter = `
	SELECT x.msg_id, x.conv_seq, x.sender_uid, x.kind, x.body, x.created_at
	FROM unnest($2::bigint[], $3::bigint[]) AS r(after, until)
	CROSS JOIN LATERAL (
		SELECT msg_id, conv_seq, sender_uid, kind, body, created_at FROM msg_content
		WHERE conv_id = $1 AND conv_seq > r.after AND conv_seq <= r.until
		ORDER BY conv_seq LIMIT $4) x
	ORDER BY x.conv_seq LIMIT $4`
	sqlPullBefore = `
	SELECT x.msg_id, x.conv_seq, x.sender_uid, x.kind, x.body, x.created_at
	FROM unnest($2::bigint[], $3::bigint[]) AS r(after, until)
	CROSS JOIN LATERAL (
		SELECT msg_id, conv_seq, sender_uid, kind, body, created_at FROM msg_content
		WHERE conv_id = $1 AND conv_seq > r.after AND conv_seq <= r.until
		ORDER BY conv_seq DESC LIMIT $4) x
	ORDER BY x.conv_seq DESC LIMIT $4`
)

// PullResult is a page of a conversation's timeline.
type PullResult struct {
	Messages []wire.Message // ascending conv_seq
	HasMore  bool           // more remain in the pull's direction
	// ExpiredUpTo: retention removed the conversation's messages up to
	// this conv_seq (0: none); they are not among Messages, and never will be.
	ExpiredUpTo int64
}

// Pull reads up to limit messages of conv visible to uid, in ascending
// conv_seq: the first ones after afterSeq, or, when beforeSeq > 0, the last
// ones before it.
func (s *Store) Pull(ctx context.Context, uid, conv, afterSeq, beforeSeq int64, limit int) (PullResult, error) {
	if limit <= 0 || limit > MaxPull {
		limit = MaxPull
	}
	v, err := s.Visible(ctx, uid, conv)
	if err != nil {
		return PullResult{}, err
	}
	msgs, more, err := s.pull(ctx, v, conv, afterSeq, beforeSeq, limit)
	return PullResult{Messages: msgs, HasMore: more, ExpiredUpTo: v.ExpiredUpTo}, err
}

func (s *Store) pull(ctx context.Context, v Visibility, conv, afterSeq, beforeSeq int64, limit int) ([]wire.Message, bool, error) {
	q, lo, hi := sqlPullAfter, afterSeq, int64(math.MaxInt64)
	if beforeSeq > 0 {
		q, lo, hi = sqlPullBefore, 0, beforeSeq-1
	}
	// The visible spans within (lo, hi].
	var afters, untils []int64
	// Nothing at or below the retention horizon: gone, or about to go.
	for _, sp := range v.Spans {
		if a, u := max(sp.After, lo, v.ExpiredUpTo), min(sp.Until, hi); a < u {
			afters, untils = append(afters, a), append(untils, u)
		}
	}
	if len(afters) == 0 {
		return nil, false, nil
	}
	rows, err := s.Pool.Query(ctx, q, conv, afters, untils, limit+1)
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

// MarkRead raises uid's read_seq in conv to upTo (capped at where its
// membership ends; never lowered) and returns the resulting read_seq and
// visibility. One read position serves every membership: reading up to s
// reads every message at or before s that uid received.
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

var sqlReadCount = `
	SELECT count(*) FILTER (WHERE m.read_seq >= $2), count(*)
	FROM conv_member m JOIN msg_content c ON c.conv_id = m.conv_id AND c.conv_seq = $2
	WHERE m.conv_id = $1 AND m.uid <> c.sender_uid AND ` + memberAt("$2::bigint")

// ReadCount returns, for message convSeq of conv, how many of its
// recipients other than its sender (the members at its conv_seq, as the
// fanout delivers: memberAt) have read it (read_seq at or past it) and how
// many recipients it has.
func (s *Store) ReadCount(ctx context.Context, conv, convSeq int64) (read, members int64, err error) {
	err = s.Pool.QueryRow(ctx, sqlReadCount, conv, convSeq).Scan(&read, &members)
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
