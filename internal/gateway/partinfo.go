package gateway

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/streams"
)

// partInfo is what catch-up needs to know about an INBOX partition.
type partInfo struct {
	firstSeq uint64 // oldest entry still in the stream
	lastSeq  uint64 // newest entry
	archived uint64 // every entry up to here is in Postgres inbox_archive
	epoch    uint64 // the stream's creation time in ns (epoch.go)
	// unfenced: the stream is behind what Postgres records of its
	// partition (it lost entries: a power cut, a restored backup) or
	// starts above the archive mark, and the syncer has not fenced it yet
	// (internal/archive/fence.go). Its tail holds seqs that will be given
	// to other entries, or none of what the archive is to serve: a
	// backfill waits.
	unfenced bool
}

// partInfos keeps partInfo of every partition fresh (one stream info per
// partition and one Postgres query per refresh, for the whole gateway).
type partInfos struct {
	g  *Gateway
	mu sync.RWMutex
	m  []partInfo
}

func (pi *partInfos) get(p int) partInfo {
	pi.mu.RLock()
	defer pi.mu.RUnlock()
	return pi.m[p]
}

func (pi *partInfos) refresh(ctx context.Context) {
	g := pi.g
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	next := make([]partInfo, g.opts.Layout.InboxPartitions)
	arch, err := g.st.ArchiveProgress(ctx)
	if err != nil {
		g.log.Debug("archive progress", zap.Error(err))
		arch = nil
	}
	written, err := g.st.WrittenHighs(ctx, len(next))
	if err != nil {
		g.log.Debug("inbox written highs", zap.Error(err))
		written = nil
	}
	for p := range next {
		s, err := g.js.Stream(ctx, streams.InboxStream(p))
		if err != nil {
			g.log.Debug("stream info", zap.Int("partition", p), zap.Error(err))
			next[p] = pi.get(p)
			continue
		}
		st := s.CachedInfo().State
		next[p] = partInfo{firstSeq: st.FirstSeq, lastSeq: st.LastSeq, archived: arch[p],
			epoch: uint64(s.CachedInfo().Created.UnixNano())}
		if arch == nil {
			next[p].archived = pi.get(p).archived
		}
		var w uint64
		if written != nil {
			w = written[p]
		}
		next[p].unfenced = unfenced(st.FirstSeq, st.LastSeq, next[p].archived, w)
	}
	pi.mu.Lock()
	var changed map[int]uint64
	for p := range next {
		if was := pi.m[p].epoch; was != 0 && next[p].epoch != was {
			if changed == nil {
				changed = map[int]uint64{}
			}
			changed[p] = next[p].epoch
		}
	}
	pi.m = next
	pi.mu.Unlock()
	if changed != nil {
		g.epochsChanged(changed) // epoch.go
	}
}

// unfenced reports whether a stream holding first..last is behind what
// Postgres records of its partition (written: the fanouts' highest
// acknowledged seq) or starts above the archive mark: a stream emptied by
// purges (trimmed) starts right above the mark, one that starts further up
// was fenced and the mark is not raised yet.
func unfenced(first, last, archived, written uint64) bool {
	return last < written || first > archived+1
}

func (pi *partInfos) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pi.refresh(ctx)
		}
	}
}
