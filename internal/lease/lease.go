// Package lease holds leases in a NATS KV bucket: a key that one holder
// owns at a time across an installation (a fanout's msg_id node id, the
// syncer's leadership of its singleton jobs).
//
// A lease is taken by creating its key (a compare-and-set on "the key does
// not exist"), kept by updates that name the revision the holder wrote
// last (compare-and-set again), and given back by a delete at that
// revision. The bucket's TTL (the stream's MaxAge) removes a key TTL after
// its last write, so a holder that dies or is cut off loses the lease TTL
// after its last renewal, and only then can another holder create the key.
//
// Timing (the safety argument). A holder counts its lease as valid until
// start + TTL - Margin, where start is the local (monotonic) time at which
// it sent its last successful write: the server stamped that write at or
// after start, so it removes the key at the earliest stamp + TTL on the
// server's clock. Between the holder's own end of validity and the moment
// another holder can take the key there is at least Margin, which covers a
// NATS server whose wall clock runs ahead of the others (a replicated
// bucket's new leader expires by the stamp the old leader wrote) and a
// slow expiry scan (which only delays the removal: safe). With the
// defaults (TTL 15s, renewal every 3s, Margin 5s) a holder stops using a
// lease at most 10s after its last successful renewal, a crashed holder's
// lease is free again 15s after its last renewal, and NATS servers' clocks
// may disagree by up to 5s. Keep the servers on NTP.
package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"
)

// Bucket is the KV bucket of inboxd's leases (stream KV_inboxd_leases).
const Bucket = "inboxd_leases"

// Timing is a lease's TTL, renewal interval and safety margin.
type Timing struct {
	// TTL is how long the bucket keeps a key after its last write.
	TTL time.Duration
	// Renew is the interval between a holder's renewals; a few renewals
	// fit in TTL-Margin so that a lost one or two cost nothing.
	Renew time.Duration
	// Margin is how much earlier than the server a holder counts its
	// lease as over (clock disagreement between NATS servers).
	Margin time.Duration
}

// DefaultTiming is the timing of inboxd's leases (see the package doc).
var DefaultTiming = Timing{TTL: 15 * time.Second, Renew: 3 * time.Second, Margin: 5 * time.Second}

// Validate checks that renewals fit in the validity window.
func (t Timing) Validate() error {
	if t.TTL <= 0 || t.Renew <= 0 || t.Margin < 0 || t.Renew >= t.TTL-t.Margin {
		return fmt.Errorf("lease: timing %+v: want 0 < renew < ttl - margin", t)
	}
	return nil
}

// BucketConfig is the leases bucket's configuration: one value per key,
// removed TTL after its last write, on replicas servers.
func BucketConfig(replicas int, t Timing) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "inboxd leases: fanout msg_id node ids (node.<id>), the syncer's singleton jobs (syncer.leader)",
		History:     1,
		TTL:         t.TTL,
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	}
}

// EnsureBucket creates the leases bucket, or updates it to this
// configuration (the syncer, the installation's steward, does this).
func EnsureBucket(ctx context.Context, js jetstream.JetStream, replicas int, t Timing) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, BucketConfig(replicas, t))
	if err != nil {
		return nil, fmt.Errorf("lease: bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// ErrHeld is returned by Acquire when another holder has the key.
var ErrHeld = errors.New("lease: held by another holder")

// ErrLost ends Keep when the lease was lost: a renewal found another
// revision (the key expired and was taken, or deleted), or no renewal
// succeeded within the validity window.
var ErrLost = errors.New("lease: lost")

// Value is what a lease's key holds: who holds it, for logs and for the
// operator (`nats kv get inboxd_leases node.3`).
type Value struct {
	Holder string    `json:"holder"`
	Since  time.Time `json:"since"`
}

// Lease is a held lease.
type Lease struct {
	kv     jetstream.KeyValue
	key    string
	t      Timing
	value  []byte
	mu     sync.Mutex
	rev    uint64
	until  time.Time // local monotonic end of validity
	done   chan struct{}
	closed bool
}

// Acquire takes key for holder, once: ErrHeld if another holder has it.
func Acquire(ctx context.Context, kv jetstream.KeyValue, key, holder string, t Timing) (*Lease, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	value, err := json.Marshal(Value{Holder: holder, Since: time.Now().UTC()})
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rev, err := kv.Create(ctx, key, value)
	if errors.Is(err, jetstream.ErrKeyExists) || revisionConflict(err) {
		return nil, fmt.Errorf("%w: %s", ErrHeld, key)
	}
	if err != nil {
		return nil, fmt.Errorf("lease: take %s: %w", key, err)
	}
	return &Lease{kv: kv, key: key, t: t, value: value, rev: rev, until: start.Add(t.TTL - t.Margin), done: make(chan struct{})}, nil
}

// Resume takes a lost lease back when nobody else took its key meanwhile:
// the key still holds the lease's own value (its holder and since), at a
// revision nobody else wrote, so an update at that revision is as safe as a
// create. A holder cut off from NATS for longer than its validity gets its
// key back at once when NATS returns, instead of waiting for the TTL.
// ErrHeld when the key is another holder's or gone (then Acquire).
func Resume(ctx context.Context, old *Lease) (*Lease, error) {
	e, err := old.kv.Get(ctx, old.key)
	if err != nil || !bytes.Equal(e.Value(), old.value) {
		return nil, fmt.Errorf("%w: %s", ErrHeld, old.key)
	}
	start := time.Now()
	rev, err := old.kv.Update(ctx, old.key, old.value, e.Revision())
	if revisionConflict(err) {
		return nil, fmt.Errorf("%w: %s", ErrHeld, old.key)
	}
	if err != nil {
		return nil, fmt.Errorf("lease: resume %s: %w", old.key, err)
	}
	return &Lease{kv: old.kv, key: old.key, t: old.t, value: old.value, rev: rev, until: start.Add(old.t.TTL - old.t.Margin), done: make(chan struct{})}, nil
}

// Holder reads who holds key ("" when nobody does).
func Holder(ctx context.Context, kv jetstream.KeyValue, key string) (string, error) {
	e, err := kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var v Value
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return "", fmt.Errorf("lease: %s: %w", key, err)
	}
	return v.Holder, nil
}

// Key is the lease's key.
func (l *Lease) Key() string { return l.key }

// Valid reports whether the holder may still act on the lease: until
// Margin before the earliest moment another holder could take it.
func (l *Lease) Valid() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return !l.closed && time.Now().Before(l.until)
}

// Done is closed when the lease is over (lost, or released by Keep).
func (l *Lease) Done() <-chan struct{} { return l.done }

// Keep renews the lease every Renew until ctx ends, then releases it
// (deletes the key at its revision, so that the next holder need not wait
// for the TTL) and returns ctx's error; or until the lease is lost
// (ErrLost). Done is closed when Keep returns.
func (l *Lease) Keep(ctx context.Context) error {
	defer l.end()
	tick := time.NewTicker(l.t.Renew)
	defer tick.Stop()
	var last error
	for {
		// A timer at the end of validity: a renewal that hangs must not
		// keep the lease valid past it.
		l.mu.Lock()
		left := time.Until(l.until)
		l.mu.Unlock()
		expire := time.NewTimer(left)
		select {
		case <-ctx.Done():
			expire.Stop()
			l.release()
			return ctx.Err()
		case <-expire.C:
			return fmt.Errorf("%w: %s: no renewal succeeded within %s (last error: %v)", ErrLost, l.key, l.t.TTL-l.t.Margin, last)
		case <-tick.C:
			expire.Stop()
		}
		start := time.Now()
		rctx, cancel := context.WithTimeout(ctx, l.t.Renew)
		rev, err := l.kv.Update(rctx, l.key, l.value, l.revision())
		cancel()
		switch {
		case err == nil:
			l.mu.Lock()
			l.rev, l.until = rev, start.Add(l.t.TTL-l.t.Margin)
			l.mu.Unlock()
		case revisionConflict(err) || errors.Is(err, jetstream.ErrKeyExists):
			return fmt.Errorf("%w: %s: %v", ErrLost, l.key, err)
		case ctx.Err() != nil:
			// Ending: handled at the top.
		default:
			last = err // NATS unreachable, a leader election: try again
		}
	}
}

func (l *Lease) revision() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rev
}

// release gives the key back at once, if it is still ours and valid.
func (l *Lease) release() {
	if !l.Valid() {
		return
	}
	l.mu.Lock()
	l.closed = true // no longer valid from here on, whatever the delete does
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := l.kv.Delete(ctx, l.key, jetstream.LastRevision(l.revision()))
	if err == nil || !revisionConflict(err) {
		return
	}
	// A renewal that the end of Keep's context interrupted may have
	// landed all the same: the key then holds our value at a revision we
	// did not see. (Another holder's value differs: its holder or since.)
	if e, gerr := l.kv.Get(ctx, l.key); gerr == nil && bytes.Equal(e.Value(), l.value) {
		_ = l.kv.Delete(ctx, l.key, jetstream.LastRevision(e.Revision()))
	}
}

func (l *Lease) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	close(l.done)
}

// Hold runs f on one holder of the installation at a time: it takes key
// (trying again every Renew while another holder has it), runs f with a
// context that ends when the lease is lost, and after a loss takes the key
// again, until ctx ends. A lost lease ends f's context at the end of its
// validity, Margin before another holder can start its own f. f should
// return when its context ends; should it return earlier, the lease is
// given back and taken again a Renew later.
func Hold(ctx context.Context, kv jetstream.KeyValue, key, holder string, t Timing, log *zap.Logger, f func(context.Context) error) error {
	log = log.With(zap.String("lease", key))
	for {
		l, err := Acquire(ctx, kv, key, holder, t)
		if err == nil {
			log.Info("lease taken: this node runs the work")
			fctx, cancel := context.WithCancel(ctx)
			kept := make(chan error, 1)
			go func() {
				kept <- l.Keep(fctx)
				cancel()
			}()
			ferr := f(fctx)
			cancel()
			kerr := <-kept
			switch {
			case ctx.Err() != nil:
				return ctx.Err()
			case errors.Is(kerr, ErrLost):
				log.Warn("lease lost; its work stopped until it is taken again", zap.Error(kerr))
			default:
				log.Warn("work under a lease ended; lease given back", zap.Error(ferr))
			}
		} else if !errors.Is(err, ErrHeld) && ctx.Err() == nil {
			log.Warn("cannot take the lease; trying again", zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(t.Renew):
		}
	}
}

// revisionConflict reports a compare-and-set that found another revision
// (Create of a deleted key whose delete marker it read from a replica that
// was behind: someone took the key meanwhile).
func revisionConflict(err error) bool {
	var apiErr *jetstream.APIError
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) ||
		errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}
