package archive

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// Stream epochs (docs/operations.md "Restore and stream epochs"). An INBOX
// stream that is lost and recreated empty (a lost disk, `nats stream rm`, a
// restored backup) numbers its entries from 1 again: below the device
// cursors, which would wait for sequences that never come or skip the new
// entries, and below the archive mark, under which the archiver would take
// the new entries for archived ones and the trimmer would purge them. The
// syncer therefore keeps every partition's sequences rising across streams:
//
//   - a missing stream is created again with FirstSeq above every sequence
//     known (the archive mark, the mirrored device cursors);
//   - a stream created by other means whose sequences are not above them is
//     renumbered: an empty one by a purge that moves its first sequence
//     there, one that holds entries already by copying them, purging, and
//     publishing the copies again (renumberEntries);
//   - the stream's epoch (its creation time) and the epoch's first sequence
//     are recorded with the archive mark, which is raised to start-1.
//
// A device cursor of an older epoch is then a position before the new
// stream's entries: the gateway trusts it up to the epoch's start - 1
// (a mirror written by a session of the old stream may be higher than
// anything the new stream numbered), and the archive serves what is below.

// errEpochPending: the stream is new and not renumbered yet; the archiver
// waits for the next check.
var errEpochPending = errors.New("archive: stream epoch not recorded yet")

// checkEpoch makes sure partition p's stream numbers its entries above
// every sequence known before it, and that the archive records its epoch.
// It reports whether the stream is another one than rec described (the
// archiver's consumer on it must be created again).
func (a *Archiver) checkEpoch(ctx context.Context, log *zap.Logger, p int, rec store.ArchiveEpoch) (bool, error) {
	mu := &a.epochMu[p]
	mu.Lock()
	defer mu.Unlock()
	name := streams.InboxStream(p)
	s, err := a.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return true, a.recreate(ctx, log, p)
	}
	if err != nil {
		return false, fmt.Errorf("look up %s: %w", name, err)
	}
	info := s.CachedInfo()
	epoch := epochOf(info)
	// The trimmer checks every partition every round: the records alone
	// first (a few rows); the device cursors are read only for a stream
	// that is not plainly the recorded one at or above them.
	recorded, _, err := a.st.RecordedFloor(ctx, a.opts.Layout.InboxPartitions)
	if err != nil {
		return false, err
	}
	if rec.StreamEpoch == epoch && info.State.LastSeq >= recorded[p] {
		return false, nil
	}
	high, err := a.highest(ctx, p)
	if err != nil {
		return false, err
	}
	if rec.StreamEpoch == epoch && info.State.LastSeq >= high {
		return false, nil
	}
	if rec.StreamEpoch == 0 && info.State.LastSeq >= high {
		// The stream the installation was created with (or one older than
		// the records): its sequences are the ones the mark counts.
		return false, a.st.RecordEpoch(ctx, p, epoch, rec.Start)
	}
	if rec.StreamEpoch == epoch {
		// The stream the records are about, behind them: it lost a
		// suffix (a power cut before its fsync, a restored backup of it).
		// Its entries are the ones Postgres knows at their seqs.
		return true, a.fence(ctx, log, p, s, high)
	}
	// Another stream than the mark's: number it above everything known.
	switch {
	case info.State.FirstSeq > high && info.State.Msgs > 0, info.State.LastSeq >= high && info.State.Msgs == 0:
		// Numbered above already (created by recreate, recorded by none).
	case info.State.Msgs == 0:
		// The purge moves an empty stream's first sequence to high+1. An
		// entry stored between the look-up and the purge would go with it:
		// counted as lost (the window is one request).
		n, err := purge(ctx, a.js.Conn(), name, "", high+1)
		if err != nil {
			return false, err
		}
		if n > 0 {
			a.lost.Add(float64(n))
			log.Error("entries stored while an empty recreated stream was renumbered were lost", zap.Int("partition", p), zap.Uint64("entries", n))
		}
	default:
		if err := a.renumberEntries(ctx, log, p, s, high); err != nil {
			return false, err
		}
	}
	log.Warn("INBOX stream recreated: its sequences now start above every earlier one", zap.Int("partition", p),
		zap.Uint64("epoch_start", high+1), zap.Uint64("archived_seq_was", rec.Archived), zap.Time("stream_created", info.Created))
	a.epochs.Inc()
	return true, a.st.RecordEpoch(ctx, p, epoch, high+1)
}

// epochOf is a stream's epoch: its creation time in ns.
func epochOf(info *jetstream.StreamInfo) uint64 { return uint64(info.Created.UnixNano()) }

// highest is the highest sequence of partition p known outside its
// stream (store.InboxFloor): the entries the fanouts wrote, the archive
// mark, the epoch's start, the mirrored device cursors.
func (a *Archiver) highest(ctx context.Context, p int) (uint64, error) {
	floor, _, err := a.st.InboxFloor(ctx, a.opts.Layout.InboxPartitions)
	if err != nil {
		return 0, err
	}
	return floor[p], nil
}

// recreate creates the lost stream of partition p again, numbering from
// above every sequence known, and records its epoch.
func (a *Archiver) recreate(ctx context.Context, log *zap.Logger, p int) error {
	high, err := a.highest(ctx, p)
	if err != nil {
		return err
	}
	cfg, err := a.opts.InboxStreamConfig(p)
	if err != nil {
		return err
	}
	cfg.FirstSeq = high + 1
	// The installation's replica count is recorded on its streams: the
	// recreated one gets SEND's, so that a start of the services finds
	// every stream alike.
	if send, err := a.js.Stream(ctx, streams.SendStream); err == nil {
		cfg.Replicas = send.CachedInfo().Config.Replicas
	}
	s, err := a.js.CreateStream(ctx, cfg)
	if err != nil {
		return fmt.Errorf("recreate %s: %w", cfg.Name, err)
	}
	info := s.CachedInfo()
	log.Warn("INBOX stream was missing: created again, numbering above every earlier sequence", zap.Int("partition", p),
		zap.Uint64("epoch_start", high+1), zap.Time("stream_created", info.Created))
	a.epochs.Inc()
	return a.st.RecordEpoch(ctx, p, epochOf(info), high+1)
}

// renumberEntries renumbers a stream that holds entries below high+1 (the
// fanout wrote into a stream someone created by hand, or a backup was
// restored): new publishes are held off by moving the stream's subjects
// aside (the fanout retries them), the entries are copied, the stream is
// purged up to high+1 (which moves its first sequence there), its subjects
// come back, and the copies are published again above high. A copy keeps
// its headers but gets another Nats-Msg-Id: the stream's dedupe window
// still knows the original one.
func (a *Archiver) renumberEntries(ctx context.Context, log *zap.Logger, p int, s jetstream.Stream, high uint64) error {
	info := s.CachedInfo()
	cfg := info.Config
	gated := cfg
	gated.Subjects = []string{"inboxd.renumbering." + strconv.Itoa(p)}
	if _, err := a.js.UpdateStream(ctx, gated); err != nil {
		return fmt.Errorf("hold off publishes to %s: %w", cfg.Name, err)
	}
	restored := false
	defer func() {
		if !restored {
			if _, err := a.js.UpdateStream(context.WithoutCancel(ctx), cfg); err != nil {
				log.Error("give the stream its subjects back", zap.String("stream", cfg.Name), zap.Error(err))
			}
		}
	}()
	s, err := a.js.Stream(ctx, cfg.Name)
	if err != nil {
		return err
	}
	st := s.CachedInfo().State
	var copies []*nats.Msg
	for seq := st.FirstSeq; seq <= st.LastSeq && st.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("copy %s seq %d: %w", cfg.Name, seq, err)
		}
		c := nats.NewMsg(m.Subject)
		c.Data = m.Data
		for k, v := range m.Header {
			c.Header[k] = v
		}
		c.Header.Set(jetstream.MsgIDHeader, m.Header.Get(jetstream.MsgIDHeader)+":renumbered:"+strconv.FormatUint(high+1, 10))
		copies = append(copies, c)
	}
	log.Warn("renumbering a recreated INBOX stream that holds entries", zap.Int("partition", p), zap.Int("entries", len(copies)))
	n, err := purge(ctx, a.js.Conn(), cfg.Name, "", high+1)
	if err != nil {
		return err
	}
	if n != uint64(len(copies)) {
		log.Error("the renumbering purge removed another count than it copied", zap.Uint64("purged", n), zap.Int("copied", len(copies)))
	}
	if _, err := a.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("give %s its subjects back: %w", cfg.Name, err)
	}
	restored = true
	for _, c := range copies {
		for {
			_, err := a.js.PublishMsg(ctx, c)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("publish the renumbered entries of %s: %w", cfg.Name, err)
			}
			log.Warn("publish a renumbered entry; retrying", zap.Error(err))
		}
	}
	return nil
}
