package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/wire"
)

// ArchivedEntry is one inbox_archive row.
type ArchivedEntry struct {
	UID     int64
	Seq     uint64
	MsgID   int64
	ConvID  int64
	ConvSeq int64
	Kind    int16
	Event   int16 // 0 for messages; else the pb.EventType of an event entry
	Peer    int64 // events: the peer of a receipt
	// CreatedAtMs is the entry's time (events: when it was published); an
	// event's row lives in the time range of it (tkey).
	CreatedAtMs int64
}

// Key is the row's tkey, its retention range key: the message's msg_id, or
// for an event the smallest msg_id of its time (now when it has none).
func (e *ArchivedEntry) Key() int64 {
	if e.MsgID != 0 {
		return e.MsgID
	}
	if e.CreatedAtMs > 0 {
		return ids.AtTime(time.UnixMilli(e.CreatedAtMs))
	}
	return ids.AtTime(time.Now())
}

// ArchiveEntries stores entries of INBOX partition p (idempotent: an entry
// already there is skipped) and raises the partition's archived_seq to
// upTo, in one transaction. Every entry of p up to upTo must be in entries
// or archived before. An entry whose retention range is gone already
// (archived later than the retention period) is not stored: it is expired.
func (s *Store) ArchiveEntries(ctx context.Context, p int, entries []ArchivedEntry, upTo uint64) error {
	return s.ArchiveBatch(ctx, p, entries, nil, upTo)
}

// ArchiveBatch is ArchiveEntries with the batch's undecodable entries,
// which go to inbox_quarantine in the same transaction: every entry of p up
// to upTo must be in entries or quarantined, or archived before.
func (s *Store) ArchiveBatch(ctx context.Context, p int, entries []ArchivedEntry, quarantined []QuarantinedEntry, upTo uint64) error {
	return s.ArchiveBatchOf(ctx, p, 0, entries, quarantined, upTo)
}

// ErrEpochChanged: the partition's stream is not the one a batch was read
// from any more (epochs.go).
var ErrEpochChanged = errors.New("store: the partition's stream epoch changed")

// ArchiveBatchOf is ArchiveBatch for entries read from the stream of
// epoch (0: any): if another stream's epoch was recorded meanwhile (the
// stream was lost and recreated, its sequences renumbered) the batch is
// not stored and ErrEpochChanged returned; its entries were of a stream
// that is gone, and their sequences may be the new stream's.
func (s *Store) ArchiveBatchOf(ctx context.Context, p int, epoch uint64, entries []ArchivedEntry, quarantined []QuarantinedEntry, upTo uint64) error {
	_, err := s.ArchiveChecked(ctx, p, epoch, entries, quarantined, upTo)
	return err
}

// Behind is what an archive batch found Postgres missing of the entries it
// archived: Postgres restored to an earlier point than the streams
// (docs/operations.md, "After a Postgres restore").
type Behind struct {
	// Raised are the conversations whose last_seq was below a conv_seq of
	// their entries, raised to it in the batch's transaction: the fanout
	// hands out conv_seqs above it again, none twice.
	Raised []ConvRaise
	// Missing are the msg_ids of the message entries whose msg_content
	// row Postgres does not hold (within the retention), one per entry:
	// their bodies are lost; devices get them as expired.
	Missing []int64
}

// ConvRaise is one conversation's last_seq raised by an archive batch.
type ConvRaise struct {
	ConvID   int64
	From, To int64
}

// ArchiveChecked is ArchiveBatchOf that also holds Postgres to what the
// entries say: a conversation whose last_seq is below a conv_seq of its
// entries is raised to it, and message entries whose msg_content row is
// missing are reported. Neither happens unless Postgres lost committed
// rows (a restore to an earlier point): the fanout commits both before it
// publishes an entry.
func (s *Store) ArchiveChecked(ctx context.Context, p int, epoch uint64, entries []ArchivedEntry, quarantined []QuarantinedEntry, upTo uint64) (Behind, error) {
	var behind Behind
	var convs, cseqs, msgs []int64
	for _, e := range entries {
		if e.MsgID != 0 && e.Event == 0 {
			convs, cseqs, msgs = append(convs, e.ConvID), append(cseqs, e.ConvSeq), append(msgs, e.MsgID)
		}
	}
	b := &pgx.Batch{}
	if len(convs) > 0 {
		// Rows locked in conv_id order, as the fanout's batch locks them;
		// normally none is behind and none is locked.
		b.Queue(`
			WITH t AS (SELECT conv, max(cs) AS seq FROM unnest($1::bigint[], $2::bigint[]) AS e(conv, cs) GROUP BY conv),
			     behind AS (SELECT c.conv_id, c.last_seq, t.seq FROM conversation c JOIN t ON c.conv_id = t.conv
			                WHERE c.last_seq < t.seq ORDER BY c.conv_id FOR UPDATE OF c)
			UPDATE conversation c SET last_seq = b.seq FROM behind b
			WHERE c.conv_id = b.conv_id AND c.last_seq < b.seq
			RETURNING c.conv_id, b.last_seq, b.seq`, convs, cseqs).Query(func(rows pgx.Rows) error {
			var r ConvRaise
			_, err := pgx.ForEachRow(rows, []any{&r.ConvID, &r.From, &r.To}, func() error {
				behind.Raised = append(behind.Raised, r)
				return nil
			})
			return err
		})
		b.Queue(`
			SELECT m FROM unnest($1::bigint[]) AS m
			WHERE m >= (SELECT min(lo) FROM data_range) AND NOT EXISTS (SELECT 1 FROM msg_content c WHERE c.msg_id = m)`, msgs).Query(func(rows pgx.Rows) error {
			var id int64
			_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
				behind.Missing = append(behind.Missing, id)
				return nil
			})
			return err
		})
	}
	queueArchiveRows(b, entries)
	for _, q := range quarantined {
		b.Queue(sqlQuarantine, p, int64(q.Seq), q.Subject, q.Raw, q.Err)
	}
	b.Queue(`
		INSERT INTO archive_progress (partition, archived_seq, updated_at) VALUES ($1, $2, now())
		ON CONFLICT (partition) DO UPDATE
		SET archived_seq = GREATEST(archive_progress.archived_seq, EXCLUDED.archived_seq), updated_at = now()`, p, int64(upTo))
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		if epoch != 0 {
			var have int64
			err := tx.QueryRow(ctx, `SELECT stream_epoch FROM archive_progress WHERE partition = $1 FOR UPDATE`, p).Scan(&have)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if have != 0 && uint64(have) != epoch {
				return ErrEpochChanged
			}
		}
		behind = Behind{}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return Behind{}, fmt.Errorf("store: archive partition %d: %w", p, err)
	}
	return behind, nil
}

// queueArchiveRows queues the insert of entries into inbox_archive
// (idempotent: a row already there is kept; one whose retention range is
// gone is not stored). The archiver and the fanout's mark both write
// through it.
func queueArchiveRows(b *pgx.Batch, entries []ArchivedEntry) {
	n := len(entries)
	if n == 0 {
		return
	}
	// Rows in (uid, seq) order: the fanout and the archiver write the same
	// rows, and two inserts that take the same keys in other orders
	// deadlock.
	entries = slices.Clone(entries)
	slices.SortFunc(entries, func(a, b ArchivedEntry) int {
		return cmp.Or(cmp.Compare(a.UID, b.UID), cmp.Compare(a.Seq, b.Seq))
	})
	uids, seqs, msgs, convs, cseqs := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	kinds, events := make([]int16, n), make([]int16, n)
	peers, keys := make([]int64, n), make([]int64, n)
	for i, e := range entries {
		uids[i], seqs[i], msgs[i], convs[i], cseqs[i], kinds[i] = e.UID, int64(e.Seq), e.MsgID, e.ConvID, e.ConvSeq, e.Kind
		events[i], peers[i], keys[i] = e.Event, e.Peer, e.Key()
	}
	b.Queue(`
		INSERT INTO inbox_archive (uid, seq, msg_id, conv_id, conv_seq, kind, event, peer_uid, tkey)
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::smallint[],
		                     $7::smallint[], $8::bigint[], $9::bigint[]) AS e(u, s, m, c, cs, k, ev, p, tkey)
		WHERE e.tkey >= (SELECT min(lo) FROM data_range)
		ORDER BY e.u, e.s
		ON CONFLICT DO NOTHING`, uids, seqs, msgs, convs, cseqs, kinds, events, peers, keys)
}

// ArchivedThrough returns partition p's archive mark: every entry of INBOX_p
// with seq <= it is in inbox_archive (or, undecodable, in inbox_quarantine),
// so purging INBOX_p below it+1 loses nothing. 0 when nothing is archived.
// The mark only rises. The trimmer and early cleanup bound their purges by
// it.
func (s *Store) ArchivedThrough(ctx context.Context, p int) (uint64, error) {
	var seq int64
	err := s.Pool.QueryRow(ctx, `SELECT archived_seq FROM archive_progress WHERE partition = $1`, p).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: archive progress of partition %d: %w", p, err)
	}
	return uint64(seq), nil
}

// ArchiveProgress returns archived_seq of every partition that has one.
func (s *Store) ArchiveProgress(ctx context.Context) (map[int]uint64, error) {
	rows, err := s.Pool.Query(ctx, `SELECT partition, archived_seq FROM archive_progress`)
	if err != nil {
		return nil, fmt.Errorf("store: archive progress: %w", err)
	}
	out := map[int]uint64{}
	var p int
	var seq int64
	_, err = pgx.ForEachRow(rows, []any{&p, &seq}, func() error {
		out[p] = uint64(seq)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: archive progress: %w", err)
	}
	return out, nil
}

// ArchivePage reads up to limit of uid's archived entries with after < seq
// <= upTo, in seq order, appending to dst, without their bodies: a message
// comes with its entry's kind and without text, sender and time; SetBody
// completes each that NeedsBody. A gateway takes the bodies from its
// cache: in a login storm of a group, every member's page joined the same
// few bodies again (the join was half of a page's cost in Postgres,
// commit 0268389).
// A message at or below its conversation's retention horizon comes
// expired, and exp gets the horizon of each conversation of the page that
// has one (the entries before it may be gone too: the device passes over
// them).
func (s *Store) ArchivePage(ctx context.Context, dst []wire.Message, exp []wire.ExpiredRange, uid int64, after, upTo uint64, limit int) ([]wire.Message, []wire.ExpiredRange, error) {
	return s.archivePage(ctx, dst, exp, sqlArchivePage, uid, after, upTo, limit)
}

// NewestPage reads the last limit of uid's archived entries with after <
// seq <= upTo, in seq order, as ArchivePage does.
func (s *Store) NewestPage(ctx context.Context, dst []wire.Message, exp []wire.ExpiredRange, uid int64, after, upTo uint64, limit int) ([]wire.Message, []wire.ExpiredRange, error) {
	n := len(dst)
	dst, exp, err := s.archivePage(ctx, dst, exp, sqlNewestPage, uid, after, upTo, limit)
	slices.Reverse(dst[n:])
	return dst, exp, err
}

// NeedsBody reports whether m, read by ArchivePage, waits for its
// body: every message (an expired one for its kind only, see SetBody).
func NeedsBody(m *wire.Message) bool {
	return m.MsgID != 0 && m.EventType == 0
}

// SetBody completes a message of ArchivePage with the body of its msg_id:
// found false (retention removed the body) expires it; a found body's kind
// is the message's (a deleted user's message is a tombstone there), also
// when the conversation's horizon expired the message already, which keeps
// no text, sender or time.
func SetBody(m *wire.Message, b Body, found bool) {
	switch {
	case m.Expired:
		if found {
			m.Kind = b.Kind
		}
	case !found:
		expire(m)
	default:
		m.Text, m.Kind, m.SenderUID, m.CreatedAtMs = b.Text, b.Kind, b.SenderUID, b.CreatedAtMs
	}
}

// expire makes m an expired message: no text, no sender, the time of its
// msg_id.
func expire(m *wire.Message) {
	m.Expired, m.Text, m.SenderUID = true, "", 0
	m.CreatedAtMs = ids.Time(m.MsgID).UnixMilli()
}

// The page's entries come with their conversation's retention horizon
// (conv_expiry, one row per conversation: a probe per message, none of it
// when nothing expired).
const (
	sqlArchiveCols = `
		SELECT a.seq, a.msg_id, a.conv_id, a.conv_seq, a.kind, a.event, a.peer_uid, coalesce(e.expired_seq, 0)
		FROM inbox_archive a LEFT JOIN conv_expiry e ON e.conv_id = a.conv_id AND a.msg_id <> 0
		WHERE a.uid = $1 AND a.seq > $2 AND a.seq <= $3`
	sqlArchivePage = sqlArchiveCols + ` ORDER BY a.seq LIMIT $4`
	sqlNewestPage  = sqlArchiveCols + ` ORDER BY a.seq DESC LIMIT $4`
)

func (s *Store) archivePage(ctx context.Context, dst []wire.Message, exp []wire.ExpiredRange, q string, uid int64, after, upTo uint64, limit int) ([]wire.Message, []wire.ExpiredRange, error) {
	rows, err := s.Pool.Query(ctx, q, uid, int64(after), int64(upTo), limit)
	if err != nil {
		return dst, exp, fmt.Errorf("store: archive page: %w", err)
	}
	defer rows.Close()
	// One set of scan targets for the page: a row scanned into fresh ones
	// put each on the heap (their addresses go through []any), six
	// allocations a row, 600,000 rows in a login storm of 3,000 × 200.
	var r struct {
		m            wire.Message
		seq, horizon int64
		kind, event  int16
	}
	dest := []any{&r.seq, &r.m.MsgID, &r.m.ConvID, &r.m.ConvSeq, &r.kind, &r.event, &r.m.EventPeer, &r.horizon}
	for rows.Next() {
		r.m = wire.Message{}
		if err := rows.Scan(dest...); err != nil {
			return dst, exp, fmt.Errorf("store: archive page: %w", err)
		}
		m := r.m
		m.Seq, m.Kind = uint64(r.seq), uint32(r.kind)
		switch {
		case r.event != 0:
			// Events keep their position in conv_seq of the row.
			m.EventType, m.EventUpTo, m.ConvSeq = uint32(r.event), m.ConvSeq, 0
		case m.ConvSeq <= r.horizon:
			// Gone, or about to go (horizons are recorded before the
			// range is dropped): expired, so that every device sees the
			// same whatever a body cache still holds.
			expire(&m)
		}
		if r.horizon > 0 {
			exp = AddExpired(exp, m.ConvID, r.horizon)
		}
		dst = append(dst, m)
	}
	return dst, exp, rows.Err()
}

// AddExpired adds conv's horizon to exp (one range per conversation, the
// highest).
func AddExpired(exp []wire.ExpiredRange, conv, upTo int64) []wire.ExpiredRange {
	for i := range exp {
		if exp[i].ConvID == conv {
			exp[i].UpTo = max(exp[i].UpTo, upTo)
			return exp
		}
	}
	return append(exp, wire.ExpiredRange{ConvID: conv, UpTo: upTo})
}

// Body is a message's text and kind as stored: the kind of a deleted
// user's message is KindDeletedBody (its text empty), whatever its inbox
// entries say.
type Body struct {
	Text string
	Kind uint32
	// SenderUID and CreatedAtMs complete an archive page's messages
	// (SetBody); an inbox entry of the stream carries its own.
	SenderUID   int64
	CreatedAtMs int64
}

// BodiesAndHorizons returns the body (text, kind, sender, time) of each msg_id found
// and the retention horizon of each of convs that has one, in one round
// trip (either list may be empty).
func (s *Store) BodiesAndHorizons(ctx context.Context, msgIDs, convs []int64) (map[int64]Body, map[int64]int64, error) {
	bodies := make(map[int64]Body, len(msgIDs))
	horizons := map[int64]int64{}
	b := &pgx.Batch{}
	if len(msgIDs) > 0 {
		b.Queue(`SELECT msg_id, body, kind, sender_uid, created_at FROM msg_content WHERE msg_id = ANY($1::bigint[])`, msgIDs)
	}
	if len(convs) > 0 {
		b.Queue(`SELECT conv_id, expired_seq FROM conv_expiry WHERE conv_id = ANY($1::bigint[]) AND expired_seq > 0`, convs)
	}
	if b.Len() == 0 {
		return bodies, horizons, nil
	}
	br := s.Pool.SendBatch(ctx, b)
	defer br.Close()
	if len(msgIDs) > 0 {
		rows, err := br.Query()
		if err != nil {
			return nil, nil, fmt.Errorf("store: bodies: %w", err)
		}
		var id, sender int64
		var body string
		var kind int16
		var created time.Time
		if _, err := pgx.ForEachRow(rows, []any{&id, &body, &kind, &sender, &created}, func() error {
			bodies[id] = Body{Text: body, Kind: uint32(kind), SenderUID: sender, CreatedAtMs: created.UnixMilli()}
			return nil
		}); err != nil {
			return nil, nil, fmt.Errorf("store: bodies: %w", err)
		}
	}
	if len(convs) > 0 {
		rows, err := br.Query()
		if err != nil {
			return nil, nil, fmt.Errorf("store: horizons: %w", err)
		}
		var c, h int64
		if _, err := pgx.ForEachRow(rows, []any{&c, &h}, func() error { horizons[c] = h; return nil }); err != nil {
			return nil, nil, fmt.Errorf("store: horizons: %w", err)
		}
	}
	return bodies, horizons, br.Close()
}

// DeviceCursor is one device_cursor row.
type DeviceCursor struct {
	UID      int64
	Device   string
	Consumer string
	AckSeq   uint64
	// Epoch is the INBOX stream epoch AckSeq was confirmed in (the stream's
	// creation time in ns; 0: written before epochs were recorded).
	Epoch uint64
}

// ArchivedBetween counts uid's archived inbox entries with after < seq <=
// upTo (the primary key's range: bounded by what it counts).
func (s *Store) ArchivedBetween(ctx context.Context, uid int64, after, upTo uint64) (uint64, error) {
	var n int64
	if err := s.Pool.QueryRow(ctx, `SELECT count(*) FROM inbox_archive WHERE uid = $1 AND seq > $2 AND seq <= $3`,
		uid, int64(after), int64(upTo)).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: archived entries between %d and %d: %w", after, upTo, err)
	}
	return uint64(n), nil
}

// NthNewestSeq returns the seq of uid's n-th newest archived entry (n ≥ 1);
// found is false when uid has fewer than n. It reads a window of at most n
// entries of the (uid, seq) index, descending from the head, and takes the
// lowest: no OFFSET, so the cost is bounded by n whatever the user's
// history, and the read can never skip or repeat rows as an OFFSET over a
// changing table might.
func (s *Store) NthNewestSeq(ctx context.Context, uid int64, n int) (seq uint64, found bool, err error) {
	if n < 1 {
		return 0, false, fmt.Errorf("store: n-th newest entry: n = %d, want at least 1", n)
	}
	var low *int64
	var got int
	err = s.Pool.QueryRow(ctx, `
		SELECT min(seq), count(*) FROM (
			SELECT seq FROM inbox_archive WHERE uid = $1 ORDER BY seq DESC LIMIT $2) newest`, uid, n).Scan(&low, &got)
	if err != nil {
		return 0, false, fmt.Errorf("store: n-th newest entry: %w", err)
	}
	if got < n || low == nil {
		return 0, false, nil
	}
	return uint64(*low), true, nil
}

// FirstSeqSince returns the seq of uid's oldest archived entry of time
// since or later among its n newest: where a new device's window starts
// in the archive. The archive holds every entry a fanout wrote (it is the
// inbox index's store of record), including entries a stream lost.
func (s *Store) FirstSeqSince(ctx context.Context, uid int64, since time.Time, n int) (seq uint64, found bool, err error) {
	if n < 1 {
		return 0, false, fmt.Errorf("store: first entry since: n = %d, want at least 1", n)
	}
	var low *int64
	err = s.Pool.QueryRow(ctx, `
		SELECT min(seq) FROM (
			SELECT seq, tkey FROM inbox_archive WHERE uid = $1 ORDER BY seq DESC LIMIT $2) newest
		WHERE tkey >= $3`, uid, n, ids.AtTime(since)).Scan(&low)
	if err != nil {
		return 0, false, fmt.Errorf("store: first entry since: %w", err)
	}
	if low == nil {
		return 0, false, nil
	}
	return uint64(*low), true, nil
}

// GetDeviceCursor returns the mirror of a device's cursor; found is false
// for a device never seen.
func (s *Store) GetDeviceCursor(ctx context.Context, uid int64, device string) (c DeviceCursor, found bool, err error) {
	c = DeviceCursor{UID: uid, Device: device}
	var seq, epoch int64
	err = s.Pool.QueryRow(ctx, `SELECT consumer, ack_seq, epoch FROM device_cursor WHERE uid = $1 AND device = $2`, uid, device).Scan(&c.Consumer, &seq, &epoch)
	if err == pgx.ErrNoRows {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("store: device cursor: %w", err)
	}
	c.AckSeq, c.Epoch = uint64(seq), uint64(epoch)
	return c, true, nil
}

// SaveDeviceCursors raises the mirrored cursors (never lowers them within
// a stream epoch), marks the devices as seen now and creates rows for new
// devices, in one statement. A cursor of a newer epoch replaces the row's
// (its position is in the newer stream); one of an older epoch (a session
// of the stream before that had not ended yet) changes nothing but
// last_seen_at. A cursor with epoch 0 (unknown) is of the row's epoch.
func (s *Store) SaveDeviceCursors(ctx context.Context, cs []DeviceCursor) error {
	if len(cs) == 0 {
		return nil
	}
	uids, devs, cons, seqs := make([]int64, len(cs)), make([]string, len(cs)), make([]string, len(cs)), make([]int64, len(cs))
	epochs := make([]int64, len(cs))
	for i, c := range cs {
		uids[i], devs[i], cons[i], seqs[i], epochs[i] = c.UID, c.Device, c.Consumer, int64(c.AckSeq), int64(c.Epoch)
	}
	_, err := s.Pool.Exec(ctx, `
		INSERT INTO device_cursor (uid, device, consumer, ack_seq, epoch, updated_at)
		SELECT u, d, c, s, e, now() FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::bigint[]) AS t(u, d, c, s, e)
		ON CONFLICT (uid, device) DO UPDATE
		SET ack_seq = CASE
		        WHEN EXCLUDED.epoch > device_cursor.epoch THEN EXCLUDED.ack_seq
		        WHEN EXCLUDED.epoch = device_cursor.epoch OR EXCLUDED.epoch = 0 THEN GREATEST(device_cursor.ack_seq, EXCLUDED.ack_seq)
		        ELSE device_cursor.ack_seq END,
		    epoch = GREATEST(device_cursor.epoch, EXCLUDED.epoch),
		    updated_at = now(), last_seen_at = now()`, uids, devs, cons, seqs, epochs)
	if err != nil {
		return fmt.Errorf("store: save device cursors: %w", err)
	}
	return nil
}
