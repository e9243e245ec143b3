package archive

import (
	"context"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// Postgres restored to an earlier point (docs/operations.md, "After a
// Postgres restore") is behind the INBOX streams: conversation.last_seq
// went back, so the fanout would hand out conv_seqs that devices hold
// already (and a client's order buffer would drop the new messages as
// repeats), and the messages stored after the restore point are gone. The
// streams still hold their entries, so every archive batch holds Postgres
// to them (store.ArchiveChecked): a conversation's last_seq below a
// conv_seq of its entries is raised to it, and a message entry without its
// msg_content row is counted and logged (its body is lost; devices get it
// as expired). At a syncer's start each partition is archived up to its
// stream's last entry before anything else starts (catchUp), so a fanout of
// the same process hands out nothing the streams know of.

// store archives a batch of partition p, holding Postgres to it.
func (a *Archiver) store(ctx context.Context, log *zap.Logger, p int, epoch uint64, entries []store.ArchivedEntry, quarantined []store.QuarantinedEntry, upTo uint64) error {
	behind, err := a.st.ArchiveChecked(ctx, p, epoch, entries, quarantined, upTo)
	if err != nil {
		return err
	}
	if len(behind.Raised) > 0 {
		a.raised.Add(float64(len(behind.Raised)))
		r := behind.Raised[0]
		log.Error("Postgres is behind the inbox streams (restored to an earlier point?): conversations' last_seq raised to their entries",
			zap.Int("conversations", len(behind.Raised)), zap.Int64("conv_id", r.ConvID), zap.Int64("last_seq_was", r.From), zap.Int64("last_seq", r.To))
	}
	if len(behind.Missing) > 0 {
		a.missing.Add(float64(len(behind.Missing)))
		log.Error("inbox entries of messages Postgres does not hold (restored to an earlier point?): their bodies are lost",
			zap.Int("entries", len(behind.Missing)), zap.Int64s("msg_ids", behind.Missing[:min(len(behind.Missing), 20)]))
	}
	return nil
}

// catchUp archives partition p up to its stream's last entry.
func (a *Archiver) catchUp(ctx context.Context, p int) error {
	s, err := a.js.Stream(ctx, streams.InboxStream(p))
	if err != nil {
		return err
	}
	mark, err := a.st.ArchivedThrough(ctx, p)
	if err != nil {
		return err
	}
	last := s.CachedInfo().State.LastSeq
	if last <= mark {
		return nil
	}
	log := a.log.With(zap.Int("partition", p))
	if last-mark > 10_000 {
		log.Warn("archiving the stream's entries beyond the mark before the services start", zap.Uint64("entries", last-mark))
	}
	from := mark + 1
	if first := s.CachedInfo().State.FirstSeq; first > from {
		// Removed before they were archived (a purge by hand, a deleted
		// user's subject): counted, as the archiver's own loop does.
		a.lost.Add(float64(first - from))
		log.Error("inbox entries were removed from the stream before they were archived",
			zap.Uint64("from_seq", from), zap.Uint64("to_seq", first-1), zap.Uint64("entries", first-from))
		from = first
	}
	return a.archiveRest(ctx, log, p, s, from, last)
}
