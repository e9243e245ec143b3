package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// The pump is a session's backfill loop: a goroutine that exists only while
// there is backlog to hand over and room in the device's window; it ends
// when caught up, and the next poke (an ack, a live entry to cover, a NATS
// reconnect) starts another.

// errRetry: the step could not make progress now and should be tried again
// after a pause (not an error worth a log line).
var errRetry = errors.New("retry")

// retryPause is how long the pump waits before trying a failed step again.
const retryPause = 500 * time.Millisecond

// retryWarn is how many retries in a row (errRetry: 10 s) make the pump say
// that the session's backfill makes no progress: each one is expected,
// none should go on for long, and a session that retries for good would
// hold its device's messages back without a word.
const retryWarn = 20

// retry is errRetry with the reason, for that warning.
func retry(reason string) error { return fmt.Errorf("%w: %s", errRetry, reason) }

// poke makes the pump look again, starting it if it is not running: a
// caught-up session holds no goroutine.
func (s *session) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
	if s.pumping.Load() {
		return // the running pump takes the wake (sleep looks once more before it ends)
	}
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if started && s.pumping.CompareAndSwap(false, true) {
		go s.pump()
	}
}

// pump produces backfill pages while there is backlog and room in the
// window; it sleeps when caught up until poked.
func (s *session) pump() {
	retries := 0 // errRetry in a row
	for {
		select {
		case <-s.ctx.Done():
			return
		default:
		}
		s.mu.Lock()
		full := s.led.Pages() >= s.prof.window
		s.mu.Unlock()
		if full {
			if !s.sleep() {
				return
			}
			continue
		}
		more, err := s.step()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			if !errors.Is(err, errRetry) {
				s.g.log.Warn("backfill step", zap.Int64("uid", s.uid), zap.String("device", s.device), zap.Error(err))
			} else if retries++; retries%retryWarn == 0 {
				s.g.log.Warn("backfill makes no progress", zap.Int64("uid", s.uid), zap.String("device", s.device),
					zap.Int("retries", retries), zap.Any("state", s.State()), zap.Error(err))
			}
			select {
			case <-s.ctx.Done():
				return
			case <-time.After(retryPause):
			}
			continue
		}
		retries = 0
		if !more && !s.sleep() {
			return
		}
	}
}

// sleep reports whether the pump goes on: it does if it was poked
// meanwhile; otherwise it ends (the next poke starts a new one).
func (s *session) sleep() bool {
	select {
	case <-s.ctx.Done():
		return false
	case <-s.wake:
		return true
	default:
	}
	s.pumping.Store(false)
	// A poke between the check above and the store saw a running pump and
	// started none: look once more.
	select {
	case <-s.wake:
		return s.pumping.CompareAndSwap(false, true)
	default:
		return false
	}
}

// step sends at most one backfill page, from the archive or from the
// consumer's tail. It reports whether it should be called again right away.
func (s *session) step() (bool, error) {
	ctx := s.ctx
	info := s.g.parts.get(s.p)
	if !s.sameEpoch(info) {
		return false, retry("the cached partition info is of another stream epoch") // epoch.go
	}
	if info.unfenced {
		return false, retry("the inbox stream lost entries and is not fenced yet") // partinfo.go
	}
	s.mu.Lock()
	covered, cursor := s.led.Covered(), s.led.Cursor()
	archive := s.fromArchive(covered, info, s.archiving)
	s.archiving = archive
	s.mu.Unlock()

	if archive {
		return s.archivePage(ctx, covered, info)
	}
	if ready, err := s.positionTail(ctx, covered, cursor); !ready || err != nil {
		return false, err
	}
	return s.tailPage(ctx)
}

// fromArchive reports whether the page after covered is read from the
// Postgres archive rather than from the consumer. It is when the archive
// holds it and the stream no longer does (trimmed: archived and older than
// the hot window), or when the consumer would have to scan more than
// TailScan entries of the partition (everyone's) from there to the head; a catch-up that started from the
// archive stays there while the archive holds the range.
//
// A filtered consumer read costs every entry of the partition in its
// range, and the server rewrites the consumer's state file per delivery
// (in a login storm most of its CPU); an archive read costs the device's
// own entries, in one indexed range read with the bodies. Switching from
// the archive to the consumer costs a wait for the pages in flight to be
// confirmed and a reposition: measured, a 300 × 200 login storm drained in
// 0.28 s from the archive, 1.4 s with the consumer (TailScan 10,000, above
// its partitions' 3,800 entries) and 0.8 s switching to it for the last
// 1,000 entries. The consumer reads the rest: a short stretch, and the
// tail the archiver has not copied yet.
func (s *session) fromArchive(covered uint64, info partInfo, archiving bool) bool {
	if covered >= info.archived {
		return false
	}
	if covered+1 < info.firstSeq || archiving {
		return true
	}
	return info.lastSeq > covered && info.lastSeq-covered > uint64(s.g.opts.TailScan)
}

// backfillBudget is the rate at which a session hands over backfill: its
// device kind's, and its user's on this gateway (shared by the user's
// devices).
type backfillBudget struct {
	device      *rate.Limiter
	deviceBurst int
	user        func() *rate.Limiter // nil when the user has no entry (the session is ending)
	userBurst   int
}

// wait takes n messages' worth from both buckets. A page larger than a
// bucket's burst is taken in pieces of at most the burst (WaitN refuses
// more than the burst at once): taking only one burst would let pages run
// page/burst times faster than the rate.
func (b backfillBudget) wait(ctx context.Context, n int) error {
	if err := waitPieces(ctx, b.device, n, b.deviceBurst); err != nil {
		return err
	}
	if ul := b.user(); ul != nil {
		return waitPieces(ctx, ul, n, b.userBurst)
	}
	return nil
}

func waitPieces(ctx context.Context, l *rate.Limiter, n, burst int) error {
	burst = max(burst, 1)
	for n > 0 {
		k := min(n, burst)
		if err := l.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
