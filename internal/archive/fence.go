package archive

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// The fence (docs/design.md, "The inbox index"; docs/operations.md,
// "After a power cut"). Postgres is the store of record of the inbox index:
// the fanout commits every message entry's archive row, at its inbox seq,
// before the sender sees STORED, and the gateways mirror the device
// cursors. An INBOX stream whose last seq is below that record lost a
// suffix: a power cut took what its server had not fsynced (nats-server
// syncs every 2 minutes by default), or a backup of it was restored. Its
// surviving entries are the same entries at the same seqs, so nothing is
// renumbered: the fence archives what the stream holds above the archive
// mark, purges the stream up to the highest seq known, which moves its
// first seq above it (the next publish gets high+1, no seq is handed out
// twice), and raises the mark there. What the stream lost is served from
// the archive by the gateways' catch-up like any archived range. Inbox
// events (read_sync, receipts) that the stream lost before the archiver
// copied them are gone; they are durable-effort, and a later event of the
// same conversation carries the same positions.

// fence moves partition p's stream, found behind high, above it.
func (a *Archiver) fence(ctx context.Context, log *zap.Logger, p int, s jetstream.Stream, high uint64) error {
	name := streams.InboxStream(p)
	info := s.CachedInfo()
	st := info.State
	mark, err := a.st.ArchivedThrough(ctx, p)
	if err != nil {
		return err
	}
	log.Error("INBOX stream is behind what Postgres records of it: it lost entries (a power cut before its fsync, a restored backup); fencing it",
		zap.String("stream", name), zap.Uint64("last_seq", st.LastSeq), zap.Uint64("recorded_seq", high), zap.Uint64("archived_seq", mark))
	if err := a.archiveRest(ctx, log, p, s, mark+1, st.LastSeq); err != nil {
		return err
	}
	n, err := purge(ctx, a.js.Conn(), name, "", high+1)
	if err != nil {
		return err
	}
	if kept := st.Msgs; n > kept {
		// Published between the copy and the purge (an inbox event of a
		// gateway: the fanouts wait for the fence).
		a.lost.Add(float64(n - kept))
		log.Error("entries stored while a stream was fenced were lost", zap.String("stream", name), zap.Uint64("entries", n-kept))
	}
	a.fenced.Inc()
	a.fencedSeqs.Add(float64(high - st.LastSeq))
	if err := a.st.RecordEpoch(ctx, p, epochOf(info), high+1); err != nil {
		return err
	}
	log.Warn("INBOX stream fenced: its sequences go on above every one known, what it lost is served from the archive",
		zap.String("stream", name), zap.Uint64("first_seq", high+1), zap.Uint64("lost_from_stream", high-st.LastSeq))
	return nil
}

// archiveRest copies partition p's entries from seq first to last into
// the archive (the archiver had not reached them); one missing from the
// stream was removed before it was archived, and is counted lost.
func (a *Archiver) archiveRest(ctx context.Context, log *zap.Logger, p int, s jetstream.Stream, first, last uint64) error {
	entries := make([]store.ArchivedEntry, 0, a.opts.BatchSize)
	var quarantined []store.QuarantinedEntry
	flush := func(upTo uint64) error {
		if err := a.store(ctx, log, p, 0, entries, quarantined, upTo); err != nil {
			return err
		}
		a.entries.Add(float64(len(entries)))
		a.quarantined.Add(float64(len(quarantined)))
		entries, quarantined = entries[:0], quarantined[:0]
		return nil
	}
	var removed uint64
	defer func() {
		if removed > 0 {
			a.lost.Add(float64(removed))
			log.Error("inbox entries were removed from the stream before they were archived", zap.Uint64("entries", removed))
		}
	}()
	for seq := first; seq <= last; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			removed++
			continue
		}
		if err != nil {
			return fmt.Errorf("archive %s seq %d before the fence: %w", streams.InboxStream(p), seq, err)
		}
		e, err := archivedEntry(m.Subject, seq, m.Data)
		if err != nil {
			log.Error("undecodable inbox entry quarantined", zap.String("subject", m.Subject), zap.Uint64("seq", seq), zap.Error(err))
			quarantined = append(quarantined, store.QuarantinedEntry{Partition: p, Seq: seq, Subject: m.Subject, Raw: m.Data, Err: err.Error()})
		} else {
			entries = append(entries, e)
		}
		if len(entries)+len(quarantined) >= a.opts.BatchSize {
			if err := flush(seq); err != nil {
				return err
			}
		}
	}
	if last >= first {
		return flush(last)
	}
	return nil
}
