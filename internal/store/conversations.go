package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Conversation kinds, as stored in conversation.kind.
const (
	KindDirect = 1
	KindGroup  = 2
)

// MaxMembers bounds a group's size: one message costs one inbox entry per
// member, so a group is a fanout multiplier.
const MaxMembers = 20000

// Conversation is a conversation row with its members.
type Conversation struct {
	ConvID       int64     `json:"conv_id"`
	Kind         int       `json:"kind"`
	LastSeq      int64     `json:"last_seq"`
	MemberVer    int64     `json:"member_ver"`
	ShareHistory bool      `json:"share_history"`
	CreatedAt    time.Time `json:"created_at"`
	Members      []Member  `json:"members"`
	// LegalHold: retention keeps the conversation's messages (SetHold).
	LegalHold bool `json:"legal_hold"`
	// ExpiredUpTo: retention removed its messages up to this conv_seq.
	ExpiredUpTo int64 `json:"expired_up_to_conv_seq,omitempty"`
}

// Member is one conv_member row.
type Member struct {
	UID       int64  `json:"uid"`
	Role      int    `json:"role"`
	JoinedSeq int64  `json:"joined_seq"`
	LeftSeq   *int64 `json:"left_seq,omitempty"`
	ReadSeq   int64  `json:"read_seq"`
}

func normalizeUIDs(uids []int64) ([]int64, error) {
	out := slices.Clone(uids)
	slices.Sort(out)
	out = slices.Compact(out)
	for _, u := range out {
		if u <= 0 {
			return nil, fmt.Errorf("%w: uid %d must be positive", ErrInvalid, u)
		}
	}
	return out, nil
}

// CreateConversation creates a direct conversation (exactly two users; asking
// again for the same pair returns the existing one, created false) or a group.
func (s *Store) CreateConversation(ctx context.Context, kind int, members []int64, shareHistory bool) (convID int64, created bool, err error) {
	uids, err := normalizeUIDs(members)
	if err != nil {
		return 0, false, err
	}
	var directKey *string
	switch kind {
	case KindDirect:
		if len(uids) != 2 {
			return 0, false, fmt.Errorf("%w: a direct conversation has exactly two distinct members, got %d (use a group)", ErrInvalid, len(uids))
		}
		k := strconv.FormatInt(uids[0], 10) + ":" + strconv.FormatInt(uids[1], 10)
		directKey = &k
	case KindGroup:
		if len(uids) == 0 || len(uids) > MaxMembers {
			return 0, false, fmt.Errorf("%w: a group has 1 to %d members, got %d", ErrInvalid, MaxMembers, len(uids))
		}
	default:
		return 0, false, fmt.Errorf("%w: conversation kind %d", ErrInvalid, kind)
	}
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			INSERT INTO conversation (kind, direct_key, share_history) VALUES ($1, $2, $3)
			ON CONFLICT (direct_key) DO NOTHING
			RETURNING conv_id`, kind, directKey, shareHistory).Scan(&convID)
		if errors.Is(err, pgx.ErrNoRows) {
			// The direct conversation of this pair exists already.
			return tx.QueryRow(ctx, `SELECT conv_id FROM conversation WHERE direct_key = $1`, *directKey).Scan(&convID)
		}
		if err != nil {
			return err
		}
		created = true
		_, err = tx.Exec(ctx, `
			INSERT INTO conv_member (conv_id, uid) SELECT $1, u FROM unnest($2::bigint[]) AS u`, convID, uids)
		return err
	})
	if err != nil {
		return 0, false, fmt.Errorf("store: create conversation: %w", err)
	}
	return convID, created, nil
}

// AddMembers adds uids to a group (re-activating former members, whose
// earlier span moves to past_seqs). They see messages after the current
// last_seq. It returns the new member_ver.
func (s *Store) AddMembers(ctx context.Context, convID int64, members []int64) (int64, error) {
	return s.changeMembers(ctx, convID, members, false, `
		INSERT INTO conv_member (conv_id, uid, joined_seq)
		SELECT $1, u, $3 FROM unnest($2::bigint[]) AS u
		ON CONFLICT (conv_id, uid) DO UPDATE
		SET joined_seq = EXCLUDED.joined_seq, left_seq = NULL, joined_at = now(),
		    past_seqs = conv_member.past_seqs
		              + int8multirange(int8range(conv_member.joined_seq, conv_member.left_seq, '(]'))
		WHERE conv_member.left_seq IS NOT NULL`)
}

// RemoveMembers removes uids from a group; they keep their history up to the
// current last_seq. It returns the new member_ver.
func (s *Store) RemoveMembers(ctx context.Context, convID int64, members []int64) (int64, error) {
	return s.changeMembers(ctx, convID, members, false, `
		UPDATE conv_member SET left_seq = $3
		WHERE conv_id = $1 AND uid = ANY($2::bigint[]) AND left_seq IS NULL`)
}

// changeMembers runs stmt ($1 conv_id, $2 the uids and, when it has a $3,
// the conversation's last_seq) under the conversation's row lock and
// raises member_ver. Only a group's members change, unless anyKind (a
// deleted user leaves direct conversations too).
func (s *Store) changeMembers(ctx context.Context, convID int64, members []int64, anyKind bool, stmt string) (int64, error) {
	uids, err := normalizeUIDs(members)
	if err != nil {
		return 0, err
	}
	if len(uids) == 0 {
		return 0, fmt.Errorf("%w: no members given", ErrInvalid)
	}
	var ver int64
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		var kind int
		var lastSeq int64
		// The row lock orders this change against the fanout's batches, which
		// lock the same row: a batch sees the membership before or after it,
		// never half of it.
		err := tx.QueryRow(ctx, `SELECT kind, last_seq FROM conversation WHERE conv_id = $1 FOR UPDATE`, convID).Scan(&kind, &lastSeq)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrConvNotFound
		}
		if err != nil {
			return err
		}
		if kind != KindGroup && !anyKind {
			return fmt.Errorf("%w: the members of a direct conversation cannot change", ErrInvalid)
		}
		args := []any{convID, uids, lastSeq}
		if !strings.Contains(stmt, "$3") {
			args = args[:2]
		}
		if _, err := tx.Exec(ctx, stmt, args...); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM conv_member WHERE conv_id = $1 AND left_seq IS NULL`, convID).Scan(&n); err != nil {
			return err
		}
		if n > MaxMembers {
			return fmt.Errorf("%w: a group has at most %d members", ErrInvalid, MaxMembers)
		}
		return tx.QueryRow(ctx, `UPDATE conversation SET member_ver = member_ver + 1 WHERE conv_id = $1 RETURNING member_ver`, convID).Scan(&ver)
	})
	if err != nil {
		return 0, fmt.Errorf("store: change members of %d: %w", convID, err)
	}
	return ver, nil
}

// GetConversation returns a conversation and all its member rows (former
// members included, with left_seq set).
func (s *Store) GetConversation(ctx context.Context, convID int64) (*Conversation, error) {
	c := &Conversation{ConvID: convID}
	err := s.Pool.QueryRow(ctx, `
		SELECT kind, last_seq, member_ver, share_history, created_at,
		       EXISTS (SELECT 1 FROM conv_hold h WHERE h.conv_id = c.conv_id),
		       coalesce((SELECT e.expired_seq FROM conv_expiry e WHERE e.conv_id = c.conv_id), 0)
		FROM conversation c WHERE conv_id = $1`, convID).
		Scan(&c.Kind, &c.LastSeq, &c.MemberVer, &c.ShareHistory, &c.CreatedAt, &c.LegalHold, &c.ExpiredUpTo)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrConvNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: get conversation %d: %w", convID, err)
	}
	rows, err := s.Pool.Query(ctx, `
		SELECT uid, role, joined_seq, left_seq, read_seq
		FROM conv_member WHERE conv_id = $1 ORDER BY uid`, convID)
	if err != nil {
		return nil, fmt.Errorf("store: members of %d: %w", convID, err)
	}
	c.Members, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) {
		var m Member
		err := r.Scan(&m.UID, &m.Role, &m.JoinedSeq, &m.LeftSeq, &m.ReadSeq)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: members of %d: %w", convID, err)
	}
	return c, nil
}

// sqlMemberSeqs is the one definition of the conv_seqs a member received:
// those of its earlier memberships (past_seqs) and of its current or last
// one, (joined_seq, left_seq] (unbounded while it is a member), as an
// int8multirange of the conv_member row aliased m. A multirange keeps its
// ranges canonical, [lower, upper): the span (joined_seq, left_seq] is
// [joined_seq+1, left_seq+1), empty ones are dropped and adjacent ones
// merged. The fanout delivers by it (MemberSpans), and every read path asks
// it: what a member may pull (Visible), read counts and trace (memberAt).
const sqlMemberSeqs = `(m.past_seqs + int8multirange(int8range(m.joined_seq, m.left_seq, '(]')))`

// memberAt is the predicate "member m received the message at conv_seq
// seq" (an SQL expression: a parameter or a column).
func memberAt(seq string) string { return sqlMemberSeqs + ` @> ` + seq }

// MemberSpan says that UID was a member of a conversation for the conv_seqs
// s with After < s <= Until (Until is math.MaxInt64 while it still is).
type MemberSpan struct {
	UID   int64
	After int64
	Until int64
}

// MemberSpans returns, per conversation, every span of every member, former
// members' and earlier memberships included, ordered by uid: who received
// which conv_seq. (A message's recipients are the members at its conv_seq;
// the fanout asks when it publishes a stored message again.)
func (s *Store) MemberSpans(ctx context.Context, convIDs []int64) (map[int64][]MemberSpan, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT m.conv_id, m.uid, lower(r) - 1, coalesce(upper(r) - 1, $2)
		FROM conv_member m, unnest(`+sqlMemberSeqs+`) AS r
		WHERE m.conv_id = ANY($1::bigint[])
		ORDER BY m.conv_id, m.uid, lower(r)`, convIDs, int64(math.MaxInt64))
	if err != nil {
		return nil, fmt.Errorf("store: member spans: %w", err)
	}
	out := make(map[int64][]MemberSpan, len(convIDs))
	var conv int64
	var sp MemberSpan
	_, err = pgx.ForEachRow(rows, []any{&conv, &sp.UID, &sp.After, &sp.Until}, func() error {
		out[conv] = append(out[conv], sp)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: member spans: %w", err)
	}
	return out, nil
}

// MemberCount returns how many members a conversation has now (0 when it
// does not exist): the inbox entries one message to it writes, since the
// fanout writes one per current member, the sender included.
func (s *Store) MemberCount(ctx context.Context, convID int64) (int, error) {
	var n int
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM conv_member WHERE conv_id = $1 AND left_seq IS NULL`, convID).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: member count of %d: %w", convID, err)
	}
	return n, nil
}
