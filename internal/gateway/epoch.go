package gateway

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/wire/pb"
)

// Stream epochs (docs/operations.md "Restore and stream epochs"): an INBOX
// stream that was lost and recreated is numbered by the syncer above every
// earlier sequence (internal/archive/epoch.go), so a device cursor of the
// stream before is a position before every entry of the new one, except
// that a cursor mirrored by a session of the old stream may be above what
// the syncer knew when it numbered the new one. A cursor of another epoch
// is therefore trusted up to the new epoch's start - 1: what the device may
// lack below that the archive serves, and everything of the new stream
// follows. Until the syncer has recorded the new stream's epoch (start
// unknown), the login of a device with a cursor of another epoch is
// refused with UNAVAILABLE: the client retries.

// errEpochPending refuses a login while the stream's epoch is not recorded.
var errEpochPending = errors.New("the inbox stream was recreated and is not renumbered yet")

// streamEpoch is an INBOX stream's epoch (its creation time in ns) and
// where its sequences start (0: unknown, the syncer has not recorded it).
type streamEpoch struct {
	epoch uint64
	start uint64
}

// currentEpoch reads the stream's epoch from the server (fresh: the cached
// one may be a refresh behind a recreation) and, when withStart, the
// epoch's start from the archive record if it is about this stream.
func (dc *deviceConsumer) currentEpoch(ctx context.Context, withStart bool) (streamEpoch, error) {
	s, err := dc.js.Stream(ctx, dc.stream)
	if err != nil {
		return streamEpoch{}, fmt.Errorf("stream %s: %w", dc.stream, err)
	}
	ep := streamEpoch{epoch: uint64(s.CachedInfo().Created.UnixNano())}
	if !withStart {
		return ep, nil
	}
	recs, err := dc.epochs.ArchiveEpochs(ctx)
	if err != nil {
		return ep, err
	}
	if r, ok := recs[dc.p]; ok && r.StreamEpoch == ep.epoch {
		ep.start = max(r.Start, 1)
	} else if !ok || r.StreamEpoch == 0 {
		ep.start = 1 // an installation's first stream, not recorded yet
	}
	return ep, nil
}

// mirrorIn returns the mirrored cursor as a position in the stream of
// epoch ep: unchanged when it was confirmed in that stream, else at most
// the epoch's start - 1. A cursor of epoch 0 (mirrored before epochs were
// recorded) is of the installation's first stream.
func mirrorIn(m store.DeviceCursor, ep streamEpoch) (store.DeviceCursor, error) {
	if m.Epoch == ep.epoch || (m.Epoch == 0 && ep.start <= 1) {
		m.Epoch = ep.epoch
		return m, nil
	}
	if ep.start == 0 {
		return m, errEpochPending
	}
	m.AckSeq, m.Epoch = min(m.AckSeq, ep.start-1), ep.epoch
	return m, nil
}

// epochForOpen returns the stream's epoch for a login and the mirror as a
// position in it. The server is asked only when the mirror's position is
// about to be used (a consumer created from it, or one moved up to it);
// otherwise the consumer found is of the current stream and the cached
// epoch names it.
func (dc *deviceConsumer) epochForOpen(ctx context.Context, mirror store.DeviceCursor, useMirror bool) (streamEpoch, store.DeviceCursor, error) {
	if cached := dc.parts.get(dc.p).epoch; !useMirror && cached != 0 {
		return streamEpoch{epoch: cached}, mirror, nil
	}
	ep, err := dc.currentEpoch(ctx, false)
	if err != nil || mirror.Epoch == ep.epoch {
		return ep, mirror, err // the mirror is of this stream: no start needed
	}
	if ep, err = dc.currentEpoch(ctx, true); err != nil {
		return ep, mirror, err
	}
	mirror, err = mirrorIn(mirror, ep)
	return ep, mirror, err
}

// epochGone reports whether the session's stream is not the one it opened
// on (recreated, or missing): its positions mean nothing in the stream
// there is now, and the session must end rather than recreate its consumer
// at its cursor. The device's next login starts from its mirror, trusted
// as mirrorIn says.
func (s *session) epochGone(ctx context.Context) bool {
	st, err := s.cons.js.Stream(ctx, s.cons.stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s.endForEpoch()
		return true
	}
	if err != nil || uint64(st.CachedInfo().Created.UnixNano()) == s.epoch.Load() {
		return false
	}
	s.endForEpoch()
	return true
}

// endForEpoch ends the session's connection with a retryable error: its
// inbox stream was recreated.
func (s *session) endForEpoch() {
	s.g.metrics.epochEnded.Inc()
	s.g.log.Warn("inbox stream recreated under a session: the device reconnects", zap.Int64("uid", s.uid),
		zap.String("device", s.device), zap.Int("partition", s.p))
	s.c.enqueue(outItem{msg: &pb.Error{Code: pb.ErrorCode_UNAVAILABLE, RetryAfterMs: 500, Fatal: true,
		Message: "the inbox stream was recreated; reconnect"}, close: true})
}

// epochsChanged ends the sessions of partitions whose stream epoch changed
// (partInfos.refresh): an idle session would never touch its vanished
// consumer, and live entries of the new stream, numbered above its old
// positions or not, must reach the device from a session of the new one.
func (g *Gateway) epochsChanged(changed map[int]uint64) {
	for _, s := range g.router.all() {
		// A session still opening (epoch 0) reads the stream's epoch itself.
		if e, ok := changed[s.p]; ok && s.epoch.Load() != 0 && s.epoch.Load() != e {
			s.endForEpoch()
		}
	}
}

// sameEpoch reports whether the cached partition info is of the session's
// stream. Right after a recreation the cache (refreshed four times a
// second) may still describe the lost stream: its first sequence and
// archive mark would make a backfill read the new stream's tail across a
// stretch that only the archive holds. The session waits for the cache
// instead (a session of the lost stream is ended meanwhile).
func (s *session) sameEpoch(info partInfo) bool {
	e := s.epoch.Load()
	return e == 0 || info.epoch == 0 || info.epoch == e
}
