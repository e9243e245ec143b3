package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrMsgNotFound is returned for an unknown msg_id.
var ErrMsgNotFound = errors.New("message not found")

// TraceMessage is what the state says about one message: its row, and per
// recipient (the members at its conv_seq, the sender included) the inbox
// entry, the read position and the devices with their mirrored cursors.
type TraceMessage struct {
	MsgID      int64            `json:"msg_id"`
	ConvID     int64            `json:"conv_id"`
	ConvSeq    int64            `json:"conv_seq"`
	SenderUID  int64            `json:"sender_uid"`
	StoredAt   time.Time        `json:"stored_at"`
	FannedOut  bool             `json:"fanned_out"`
	Recipients []TraceRecipient `json:"recipients"`
}

// TraceRecipient is one recipient of a traced message.
type TraceRecipient struct {
	UID     int64         `json:"uid"`
	Seq     uint64        `json:"seq"` // the inbox entry (0: not archived yet)
	ReadSeq int64         `json:"read_seq"`
	Status  string        `json:"status"` // STORED or READ (user level; devices say DELIVERED)
	Devices []TraceDevice `json:"devices"`
}

// TraceDevice is a device of a recipient with its mirrored cursor.
type TraceDevice struct {
	Device     string    `json:"device"`
	Consumer   string    `json:"consumer"`
	Cursor     uint64    `json:"cursor"`
	LastSeenAt time.Time `json:"last_seen_at"`
	Status     string    `json:"status"` // set by the caller: STORED, DELIVERED or READ
}

// The recipients of a message are the members at its conv_seq (memberAt:
// every membership counts, the sender's included), as the fanout delivers.
var sqlTraceRecipients = `
	SELECT m.uid, m.read_seq, coalesce(a.seq, 0)
	FROM conv_member m
	LEFT JOIN inbox_archive a ON a.msg_id = $3 AND a.tkey = $3 AND a.uid = m.uid
	WHERE m.conv_id = $1 AND ` + memberAt("$2::bigint") + `
	ORDER BY m.uid`

// Trace gathers a message's state from the tables that hold it anyway: no
// per-message status is ever written.
func (s *Store) Trace(ctx context.Context, msgID int64) (*TraceMessage, error) {
	t := &TraceMessage{MsgID: msgID}
	err := s.Pool.QueryRow(ctx, `SELECT conv_id, conv_seq, sender_uid, created_at, fanned_out FROM msg_content WHERE msg_id = $1`, msgID).
		Scan(&t.ConvID, &t.ConvSeq, &t.SenderUID, &t.StoredAt, &t.FannedOut)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrMsgNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store: trace: %w", err)
	}
	rows, err := s.Pool.Query(ctx, sqlTraceRecipients, t.ConvID, t.ConvSeq, msgID)
	if err != nil {
		return nil, fmt.Errorf("store: trace recipients: %w", err)
	}
	t.Recipients, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (TraceRecipient, error) {
		var tr TraceRecipient
		var seq int64
		err := r.Scan(&tr.UID, &tr.ReadSeq, &seq)
		tr.Seq = uint64(seq)
		return tr, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: trace recipients: %w", err)
	}
	uids := make([]int64, len(t.Recipients))
	at := map[int64]int{}
	for i, r := range t.Recipients {
		uids[i], at[r.UID] = r.UID, i
	}
	rows, err = s.Pool.Query(ctx, `
		SELECT uid, device, consumer, ack_seq, last_seen_at FROM device_cursor
		WHERE uid = ANY($1::bigint[]) ORDER BY uid, device`, uids)
	if err != nil {
		return nil, fmt.Errorf("store: trace devices: %w", err)
	}
	var uid, ack int64
	var d TraceDevice
	_, err = pgx.ForEachRow(rows, []any{&uid, &d.Device, &d.Consumer, &ack, &d.LastSeenAt}, func() error {
		d.Cursor = uint64(ack)
		t.Recipients[at[uid]].Devices = append(t.Recipients[at[uid]].Devices, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: trace devices: %w", err)
	}
	return t, nil
}

// Stuck is a message a device should have confirmed by now.
type Stuck struct {
	UID        int64     `json:"uid"`
	Device     string    `json:"device"`
	MsgID      int64     `json:"msg_id"`
	ConvID     int64     `json:"conv_id"`
	Seq        uint64    `json:"seq"`
	Cursor     uint64    `json:"cursor"`
	StoredAt   time.Time `json:"stored_at"`
	LastSeenAt time.Time `json:"last_seen_at"`
}

// Audit lists messages stored more than olderThan ago whose recipients'
// devices were connected after they were stored and still have not
// confirmed them (their cursor is below the entry): devices that stopped
// confirming, or deliveries that are stuck.
func (s *Store) Audit(ctx context.Context, olderThan time.Duration, limit int) ([]Stuck, error) {
	rows, err := s.Pool.Query(ctx, `
		SELECT d.uid, d.device, a.msg_id, a.conv_id, a.seq, d.ack_seq, m.created_at, d.last_seen_at
		FROM device_cursor d
		JOIN inbox_archive a ON a.uid = d.uid AND a.seq > d.ack_seq AND a.msg_id <> 0
		JOIN msg_content m ON m.msg_id = a.msg_id
		WHERE m.created_at < now() - $1::interval AND d.last_seen_at > m.created_at
		ORDER BY m.created_at, d.uid, d.device
		LIMIT $2`, olderThan, limit)
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Stuck, error) {
		var st Stuck
		var seq, ack int64
		err := r.Scan(&st.UID, &st.Device, &st.MsgID, &st.ConvID, &seq, &ack, &st.StoredAt, &st.LastSeenAt)
		st.Seq, st.Cursor = uint64(seq), uint64(ack)
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	return out, nil
}
