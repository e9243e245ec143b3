package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// LoginState is what a login reads from Postgres before the session opens.
type LoginState struct {
	Convs     []ConvSummary // the first page of the summary (Summary)
	More      bool
	RevokedAt time.Time // RevokedAt of the device (zero: none)
	// Cursor is the device's mirrored cursor (GetDeviceCursor), read with
	// the rest; CursorFound is false for a device never seen.
	Cursor      DeviceCursor
	CursorFound bool
}

// LoginKey is a device logging in.
type LoginKey struct {
	UID    int64
	Device string
}

// The revocation covering each device of a batch of logins and its
// mirrored cursor: a row per device, in the batch's order, the cursor's
// columns null for a device never seen.
const sqlLoginDevices = `
	SELECT (SELECT max(revoked_at) FROM revocation r WHERE r.uid = l.uid AND r.device IN (l.device, '')),
	       dc.consumer, dc.ack_seq, dc.epoch
	FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS l (uid, device, i)
	LEFT JOIN device_cursor dc ON dc.uid = l.uid AND dc.device = l.device
	ORDER BY l.i`

// The first page of each login's summary, numbered by the login's place
// in the batch (from 1), each page asked with limit $2.
var sqlLoginSummaries = `
	SELECT u.i, s.* FROM unnest($1::bigint[]) WITH ORDINALITY AS u (uid, i)
	CROSS JOIN LATERAL (` + summaryQuery("u.uid", "0", "$2") + `) s
	ORDER BY u.i, s.last_id DESC`

// Login reads the first page of uid's summary, the revocation covering
// device and the device's mirrored cursor: Logins of one.
func (s *Store) Login(ctx context.Context, uid int64, device string) (LoginState, error) {
	out, err := s.Logins(ctx, []LoginKey{{uid, device}})
	if err != nil {
		return LoginState{}, err
	}
	return out[0], nil
}

// Logins reads what Login reads for each of keys, in one round trip and
// two statements whatever their number: Postgres's cost of a login is
// mostly per statement and round trip, not in the queries (`inboxbench
// conns`: ~250 µs of Postgres CPU per login read alone, of which the
// queries' execution was ~12 µs), so a login wave read in batches
// (LoginBatcher) costs it a fraction of that.
func (s *Store) Logins(ctx context.Context, keys []LoginKey) ([]LoginState, error) {
	uids := make([]int64, len(keys))
	devices := make([]string, len(keys))
	out := make([]LoginState, len(keys))
	for i, k := range keys {
		uids[i], devices[i] = k.UID, k.Device
		out[i].Cursor = DeviceCursor{UID: k.UID, Device: k.Device}
	}
	var b pgx.Batch
	b.Queue(sqlLoginDevices, uids, devices)
	b.Queue(sqlLoginSummaries, uids, SummaryLimit+1)
	br := s.Pool.SendBatch(ctx, &b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, fmt.Errorf("store: login of %d devices: revocations and cursors: %w", len(keys), err)
	}
	i := 0
	for rows.Next() {
		if i == len(out) {
			rows.Close()
			return nil, fmt.Errorf("store: login of %d devices: more rows than devices", len(keys))
		}
		var at *time.Time
		var consumer *string
		var seq, epoch *int64
		if err := rows.Scan(&at, &consumer, &seq, &epoch); err != nil {
			rows.Close()
			return nil, fmt.Errorf("store: login of %d devices: revocations and cursors: %w", len(keys), err)
		}
		st := &out[i]
		if at != nil {
			st.RevokedAt = *at
		}
		if consumer != nil && seq != nil && epoch != nil {
			st.Cursor.Consumer, st.Cursor.AckSeq, st.Cursor.Epoch = *consumer, uint64(*seq), uint64(*epoch)
			st.CursorFound = true
		}
		i++
	}
	if err := rows.Err(); err != nil || i != len(out) {
		return nil, fmt.Errorf("store: login of %d devices: revocations and cursors (%d rows): %v", len(keys), i, err)
	}
	rows, err = br.Query()
	if err != nil {
		return nil, fmt.Errorf("store: login of %d devices: summaries: %w", len(keys), err)
	}
	defer rows.Close()
	for rows.Next() {
		var n int64
		var c ConvSummary
		if err := scanSummary(rows, &c, &n); err != nil {
			return nil, fmt.Errorf("store: login of %d devices: summaries: %w", len(keys), err)
		}
		if n < 1 || n > int64(len(out)) {
			return nil, fmt.Errorf("store: login of %d devices: a summary row of login %d", len(keys), n)
		}
		st := &out[n-1]
		if len(st.Convs) == SummaryLimit {
			st.More = true
			continue
		}
		st.Convs = append(st.Convs, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: login of %d devices: summaries: %w", len(keys), err)
	}
	return out, nil
}

// LoginBatcher reads logins in batches (Logins): a login finding fewer
// than flights batches in flight sends its own at once, with whatever
// logins wait; the others wait for the next batch to leave. One login
// alone costs no wait (it leaves at once), and in a login wave each batch
// carries the logins that arrived while the previous ones were in flight,
// so the per-statement cost is paid per batch instead of per login. No
// timer and no long-lived goroutine: a login that finds a free flight
// starts it on a goroutine (so that this login's caller can give up like
// any other), and a flight that finds logins waiting when it lands goes
// on with them.
type LoginBatcher struct {
	st       *Store
	flights  int
	maxBatch int
	timeout  time.Duration

	mu      sync.Mutex
	waiting []*loginCall
	flying  int

	batches, logins atomic.Int64
}

type loginCall struct {
	key  LoginKey
	st   LoginState
	err  error
	done chan struct{}
}

// NewLoginBatcher returns a batcher of st's logins with at most flights
// batches in flight (each holds a connection of st's pool while it flies)
// of at most maxBatch logins each.
func NewLoginBatcher(st *Store, flights, maxBatch int) *LoginBatcher {
	return &LoginBatcher{st: st, flights: max(flights, 1), maxBatch: max(maxBatch, 1), timeout: 5 * time.Second}
}

// Login is Store.Login, read in a batch with the logins around it. A
// batch's read has its own timeout (5 s), as it serves many callers; ctx
// ending returns ctx's error at once (the batch's answer for this login is
// then dropped).
func (b *LoginBatcher) Login(ctx context.Context, uid int64, device string) (LoginState, error) {
	c := &loginCall{key: LoginKey{uid, device}, done: make(chan struct{})}
	b.mu.Lock()
	b.waiting = append(b.waiting, c)
	fly := b.flying < b.flights
	if fly {
		b.flying++
	}
	b.mu.Unlock()
	if fly {
		go b.fly()
	}
	select {
	case <-c.done:
		return c.st, c.err
	case <-ctx.Done():
		return LoginState{}, fmt.Errorf("store: login %d/%q: %w", uid, device, ctx.Err())
	}
}

// fly sends batches of the waiting logins and answers them, until none
// waits.
func (b *LoginBatcher) fly() {
	for b.flyOnce() {
	}
}

// flyOnce sends one batch of the waiting logins and answers them. It
// reports whether logins are waiting still (the flight goes on); if not,
// the flight has landed.
func (b *LoginBatcher) flyOnce() bool {
	b.mu.Lock()
	n := min(len(b.waiting), b.maxBatch)
	batch := make([]*loginCall, n)
	copy(batch, b.waiting)
	rest := copy(b.waiting, b.waiting[n:])
	clear(b.waiting[rest:]) // answered calls are not kept alive by the array
	b.waiting = b.waiting[:rest]
	b.mu.Unlock()
	if n > 0 {
		keys := make([]LoginKey, n)
		for i, c := range batch {
			keys[i] = c.key
		}
		ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
		out, err := b.st.Logins(ctx, keys)
		cancel()
		b.batches.Add(1)
		b.logins.Add(int64(n))
		for i, c := range batch {
			if err != nil {
				c.err = err
			} else {
				c.st = out[i]
			}
			close(c.done)
		}
	}
	b.mu.Lock()
	more := len(b.waiting) > 0
	if !more {
		b.flying--
	}
	b.mu.Unlock()
	return more
}

// Stats returns how many batches were sent and the logins they carried.
func (b *LoginBatcher) Stats() (batches, logins int64) {
	return b.batches.Load(), b.logins.Load()
}

// Waiting returns how many logins wait for a batch.
func (b *LoginBatcher) Waiting() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiting)
}
