package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/wire"
)

// The states of a user deletion (user_deletion.state).
const (
	DeletionPending = "pending" // asked for, no syncer has started it
	DeletionRunning = "running" // a syncer works on it, or will resume it
	DeletionDone    = "done"    // every step ran: the user's data is gone
)

// UserDeletion is one user_deletion row: a deletion job and how far it got.
type UserDeletion struct {
	UID         int64            `json:"uid"`
	State       string           `json:"state"`
	Step        string           `json:"step"` // the next step to run ("" before the first)
	Progress    DeletionProgress `json:"progress"`
	Runs        int              `json:"runs"`            // how often a syncer started or resumed it
	Error       string           `json:"error,omitempty"` // the last error of a step (retried)
	RequestedAt time.Time        `json:"requested_at"`
	StartedAt   *time.Time       `json:"started_at,omitempty"`
	FinishedAt  *time.Time       `json:"finished_at,omitempty"`
}

// DeletionProgress is what the steps of a deletion removed so far, and
// where a step that works in batches resumes.
type DeletionProgress struct {
	// Revoked says the user's tokens were revoked (every device), so a
	// device cannot log in again with an old one; RevokeNote says why not.
	Revoked    bool   `json:"revoked"`
	RevokeNote string `json:"revoke_note,omitempty"`

	Conversations int64 `json:"conversations"` // memberships removed (with their read state)
	Consumers     int64 `json:"consumers"`     // device cursor consumers deleted
	InboxEntries  int64 `json:"inbox_entries"` // entries purged from the INBOX stream
	ArchiveRows   int64 `json:"archive_rows"`  // inbox_archive rows deleted
	Cursors       int64 `json:"cursors"`       // device_cursor rows deleted
	Bodies        int64 `json:"bodies"`        // sent bodies replaced by a tombstone
	BodiesHeld    int64 `json:"bodies_held"`   // sent bodies kept: their conversation is under legal hold
	Rejects       int64 `json:"rejects"`       // send_reject rows deleted

	// Rounds counts the passes over the steps: the last one checks that
	// nothing of the user is left and starts another pass if something
	// came back (an entry in flight when the membership went).
	Rounds int `json:"rounds"`
	// BodiesAfter is the resume point of the bodies step: the user's
	// sends are walked by client_msg_id, the key of their index.
	BodiesAfter string `json:"bodies_after,omitempty"`
	// Waiting says what the current step waits for, while it does.
	Waiting string `json:"waiting,omitempty"`
	// MembershipsGoneAt is when the memberships step ended: fanout
	// batches committed before may still publish to the user (settle).
	MembershipsGoneAt *time.Time `json:"memberships_gone_at,omitempty"`
}

const sqlDeletionColumns = `uid, state, step, progress, runs, error, requested_at, started_at, finished_at`

func scanDeletion(row pgx.Row) (UserDeletion, error) {
	var d UserDeletion
	var progress []byte
	err := row.Scan(&d.UID, &d.State, &d.Step, &progress, &d.Runs, &d.Error, &d.RequestedAt, &d.StartedAt, &d.FinishedAt)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(progress, &d.Progress); err != nil {
		return d, fmt.Errorf("progress of the deletion of %d: %w", d.UID, err)
	}
	return d, nil
}

// RequestUserDeletion records that uid's data is to be deleted and returns
// the job: a new one, or the one asked for before, whatever its state (a
// request is idempotent; a done job stays done). With again, a done job
// starts over, for data the user got after it finished (added to a
// conversation again); a job still running just continues.
func (s *Store) RequestUserDeletion(ctx context.Context, uid int64, again bool) (UserDeletion, error) {
	if uid <= 0 {
		return UserDeletion{}, fmt.Errorf("%w: uid %d must be positive", ErrInvalid, uid)
	}
	d, err := scanDeletion(s.Pool.QueryRow(ctx, `
		INSERT INTO user_deletion (uid) VALUES ($1)
		ON CONFLICT (uid) DO UPDATE
		SET state = 'pending', step = '', progress = '{}', error = '', requested_at = now(),
		    started_at = NULL, finished_at = NULL, updated_at = now()
		WHERE $2 AND user_deletion.state = 'done'
		RETURNING `+sqlDeletionColumns, uid, again))
	if errors.Is(err, pgx.ErrNoRows) { // asked before, left as it is
		d, _, err = s.UserDeletion(ctx, uid)
	}
	if err != nil {
		return d, fmt.Errorf("store: request deletion of %d: %w", uid, err)
	}
	return d, nil
}

// UserDeletion returns the deletion job of uid; found is false when none
// was asked for.
func (s *Store) UserDeletion(ctx context.Context, uid int64) (d UserDeletion, found bool, err error) {
	d, err = scanDeletion(s.Pool.QueryRow(ctx, `SELECT `+sqlDeletionColumns+` FROM user_deletion WHERE uid = $1`, uid))
	if errors.Is(err, pgx.ErrNoRows) {
		return d, false, nil
	}
	if err != nil {
		return d, false, fmt.Errorf("store: deletion of %d: %w", uid, err)
	}
	return d, true, nil
}

// UnfinishedDeletions returns the uids of jobs not done, oldest request
// first, at most limit.
func (s *Store) UnfinishedDeletions(ctx context.Context, limit int) ([]int64, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT uid FROM user_deletion WHERE state <> 'done' ORDER BY requested_at LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: unfinished deletions: %w", err)
	}
	uids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("store: unfinished deletions: %w", err)
	}
	return uids, nil
}

// SaveUserDeletion writes a job's state, step, progress, runs, error and
// times.
func (s *Store) SaveUserDeletion(ctx context.Context, d UserDeletion) error {
	progress, err := json.Marshal(d.Progress)
	if err != nil {
		return err
	}
	_, err = s.Pool.Exec(ctx, `
		UPDATE user_deletion SET state = $2, step = $3, progress = $4, runs = $5, error = $6,
		       started_at = $7, finished_at = $8, updated_at = now()
		WHERE uid = $1`, d.UID, d.State, d.Step, progress, d.Runs, d.Error, d.StartedAt, d.FinishedAt)
	if err != nil {
		return fmt.Errorf("store: save deletion of %d: %w", d.UID, err)
	}
	return nil
}

// TryLock takes the session-level advisory lock named key, if no other
// session holds it, on a connection of its own outside the pool (a job
// holds it for as long as it runs, and must not take a pooled connection
// from the roles meanwhile): a job that runs on several syncers at once is
// run by one. The lock lives as long as the connection: release closes
// it, and a process that dies loses it with its connection, so nothing is
// ever left locked. No transaction stays open meanwhile (none holds back
// vacuum).
func (s *Store) TryLock(ctx context.Context, key string) (release func(), ok bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.Pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, false, fmt.Errorf("store: lock %s: %w", key, err)
	}
	closeConn := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, key).Scan(&ok); err != nil {
		closeConn()
		return nil, false, fmt.Errorf("store: lock %s: %w", key, err)
	}
	if !ok {
		closeConn()
		return nil, false, nil
	}
	return closeConn, true, nil
}

// UserConversations returns every conversation uid has a membership row
// in, current or former.
func (s *Store) UserConversations(ctx context.Context, uid int64) ([]int64, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT conv_id FROM conv_member WHERE uid = $1 AND left_seq IS NULL
		UNION ALL
		SELECT conv_id FROM conv_member WHERE uid = $1 AND left_seq IS NOT NULL
		ORDER BY 1`, uid)
	if err != nil {
		return nil, fmt.Errorf("store: conversations of %d: %w", uid, err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("store: conversations of %d: %w", uid, err)
	}
	return ids, nil
}

// ForgetMember removes uid's membership row from conv: its membership,
// former ones, and its read state. It goes the way of RemoveMembers (the
// conversation row locked, member_ver raised), so a fanout batch sees the
// membership before or after it and a fanout's member cache is stale from
// then on; unlike RemoveMembers it also applies to direct conversations,
// which keep their other member. It returns the new member_ver; a uid
// that has no row there changes nothing but member_ver.
func (s *Store) ForgetMember(ctx context.Context, conv, uid int64) (int64, error) {
	return s.changeMembers(ctx, conv, []int64{uid}, true, `
		DELETE FROM conv_member WHERE conv_id = $1 AND uid = ANY($2::bigint[])`)
}

// Unfanned reports whether a message with lo <= msg_id < hi is not fanned
// out yet: its inbox publishes may still be in flight. msg_ids are
// time-ordered, so the range is a stretch of time, read by the primary key.
func (s *Store) Unfanned(ctx context.Context, lo, hi int64) (bool, error) {
	var found bool
	err := s.Pool.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM msg_content WHERE msg_id >= $1 AND msg_id < $2 AND NOT fanned_out)`, lo, hi).Scan(&found)
	if err != nil {
		return false, fmt.Errorf("store: messages in flight: %w", err)
	}
	return found, nil
}

// DeleteUserArchive deletes up to limit of uid's inbox_archive rows, oldest
// first, and returns how many it deleted.
func (s *Store) DeleteUserArchive(ctx context.Context, uid int64, limit int) (int64, error) {
	tag, err := s.Pool.Exec(ctx, `
		DELETE FROM inbox_archive WHERE uid = $1 AND seq IN (
			SELECT seq FROM inbox_archive WHERE uid = $1 ORDER BY seq LIMIT $2)`, uid, limit)
	if err != nil {
		return 0, fmt.Errorf("store: delete archive of %d: %w", uid, err)
	}
	return tag.RowsAffected(), nil
}

// UserCursors returns uid's device_cursor rows.
func (s *Store) UserCursors(ctx context.Context, uid int64) ([]DeviceCursor, error) {
	rows, err := s.Pool.Query(ctx, `SELECT device, consumer, ack_seq FROM device_cursor WHERE uid = $1 ORDER BY device`, uid)
	if err != nil {
		return nil, fmt.Errorf("store: cursors of %d: %w", uid, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (DeviceCursor, error) {
		c := DeviceCursor{UID: uid}
		var seq int64
		err := r.Scan(&c.Device, &c.Consumer, &seq)
		c.AckSeq = uint64(seq)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: cursors of %d: %w", uid, err)
	}
	return out, nil
}

// DeleteUserCursors deletes uid's device_cursor rows (a user has a few
// devices: one statement) and returns how many it deleted.
func (s *Store) DeleteUserCursors(ctx context.Context, uid int64) (int64, error) {
	tag, err := s.Pool.Exec(ctx, `DELETE FROM device_cursor WHERE uid = $1`, uid)
	if err != nil {
		return 0, fmt.Errorf("store: delete cursors of %d: %w", uid, err)
	}
	return tag.RowsAffected(), nil
}

// SentMessage names one message a user sent.
type SentMessage struct {
	MsgID       int64
	ConvID      int64
	ClientMsgID string
	Deleted     bool // its body is a tombstone already
}

// SentMessages returns up to limit of uid's sent messages whose
// client_msg_id is above after, in client_msg_id order: the order of the
// (sender_uid, client_msg_id) index, so each batch reads only its own
// rows however many the user sent.
func (s *Store) SentMessages(ctx context.Context, uid int64, after string, limit int) ([]SentMessage, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT msg_id, conv_id, client_msg_id, kind = $4 FROM msg_content
		WHERE sender_uid = $1 AND client_msg_id > $2
		ORDER BY client_msg_id LIMIT $3`, uid, after, limit, KindDeletedBody)
	if err != nil {
		return nil, fmt.Errorf("store: sent messages of %d: %w", uid, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (SentMessage, error) {
		var m SentMessage
		err := r.Scan(&m.MsgID, &m.ConvID, &m.ClientMsgID, &m.Deleted)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: sent messages of %d: %w", uid, err)
	}
	return out, nil
}

// KindDeletedBody is the msg_content.kind of a tombstone (wire.KindDeleted):
// the message of a deleted user, its body and sending device erased. The
// row stays, so the conversation's conv_seqs stay dense and every
// member's pages and pulls show the message as deleted instead of a hole
// their gap logic would wait on.
const KindDeletedBody = wire.KindDeleted

// TombstoneBodies erases the bodies of msgIDs (text and sending device;
// kind KindDeletedBody) and returns those it changed: not those already
// erased, nor those of a conversation under legal hold. It holds the hold
// lock shared meanwhile, so a hold set at the same time (SetHold) and a
// range retention drops or rebuilds (ranges.go) come before or after the
// erasure, never half-way through it; a conversation held by then keeps
// its bodies.
func (s *Store) TombstoneBodies(ctx context.Context, msgIDs []int64) ([]int64, error) {
	if len(msgIDs) == 0 {
		return nil, nil
	}
	var erased []int64
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock_shared($1)`, lockHold); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
			UPDATE msg_content m SET body = '', sender_device = '', kind = $2
			WHERE m.msg_id = ANY($1::bigint[]) AND m.kind <> $2
			  AND NOT EXISTS (SELECT 1 FROM conv_hold h WHERE h.conv_id = m.conv_id)
			RETURNING m.msg_id`, msgIDs, KindDeletedBody)
		if err != nil {
			return err
		}
		erased, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: erase bodies: %w", err)
	}
	return erased, nil
}

// DeleteUserRejects deletes up to limit of uid's send_reject rows and
// returns how many it deleted.
func (s *Store) DeleteUserRejects(ctx context.Context, uid int64, limit int) (int64, error) {
	tag, err := s.Pool.Exec(ctx, `
		DELETE FROM send_reject WHERE sender_uid = $1 AND client_msg_id IN (
			SELECT client_msg_id FROM send_reject WHERE sender_uid = $1 LIMIT $2)`, uid, limit)
	if err != nil {
		return 0, fmt.Errorf("store: delete rejects of %d: %w", uid, err)
	}
	return tag.RowsAffected(), nil
}

// UserRemains counts what is left of uid in Postgres: membership rows,
// device_cursor rows and inbox_archive rows (the last check of a deletion).
type UserRemains struct {
	Members, Cursors, Archive int64
}

// Any reports whether anything is left.
func (r UserRemains) Any() bool { return r.Members+r.Cursors+r.Archive > 0 }

// UserRemains counts what is left of uid (see the type).
func (s *Store) UserRemains(ctx context.Context, uid int64) (UserRemains, error) {
	var r UserRemains
	err := s.Pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM conv_member WHERE uid = $1 AND left_seq IS NULL)
		     + (SELECT count(*) FROM conv_member WHERE uid = $1 AND left_seq IS NOT NULL),
		       (SELECT count(*) FROM device_cursor WHERE uid = $1),
		       (SELECT count(*) FROM (SELECT 1 FROM inbox_archive WHERE uid = $1 LIMIT 100000) a)`, uid).
		Scan(&r.Members, &r.Cursors, &r.Archive)
	if err != nil {
		return r, fmt.Errorf("store: what is left of %d: %w", uid, err)
	}
	return r, nil
}
