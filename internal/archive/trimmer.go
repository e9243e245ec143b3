package archive

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/streams"
)

// The trimmer enforces the hot window in place of a MaxAge: every round it
// purges, per INBOX partition, the entries that are both archived and older
// than the window recorded on the stream (streams.HotWindow). An archiver
// that is down or behind holds the streams' heads where they are, however
// long: nothing is dropped that the archive does not hold. A purge moves
// every consumer of the stream past the purged entries; devices whose
// cursor was below read them from the archive (the gateway's fromArchive).
//
// A round's purge is bounded by the archive mark read one round earlier,
// not the newest: a mark a gateway's catch-up has not seen yet (it
// refreshes its view four times a second) is never the one that trims, so
// a catch-up that reads a stretch from the stream because the archive had
// not reached it does not find that stretch purged under it.

type trimMetrics struct {
	trimmed prometheus.Counter
	errors  prometheus.Counter
	lag     *prometheus.GaugeVec
	oldest  *prometheus.GaugeVec
}

func newTrimMetrics(f promauto.Factory) trimMetrics {
	return trimMetrics{
		trimmed: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_trimmed_entries_total",
			Help: "Inbox entries purged from the INBOX streams by the trimmer: archived and older than the hot window."}),
		errors: f.NewCounter(prometheus.CounterOpts{Name: "inboxd_archive_trim_errors_total",
			Help: "Trimmer rounds of a partition that failed (stream info, archive mark, purge); the next round tries again."}),
		lag: f.NewGaugeVec(prometheus.GaugeOpts{Name: "inboxd_archive_lag_entries",
			Help: "Entries of a partition's stream after the archive mark: how far the archiver is behind the stream head (trimmer round)."}, []string{"partition"}),
		oldest: f.NewGaugeVec(prometheus.GaugeOpts{Name: "inboxd_archive_oldest_unarchived_seconds",
			Help: "Age of the oldest entry of a partition not archived yet; 0 when the archive is up to the head (trimmer round)."}, []string{"partition"}),
	}
}

// RunTrimmer runs the trimmer alone (Options.SeparateTrimmer) until ctx
// ends. Its purges are idempotent: two trimmers at once would do no harm,
// only work twice.
func (a *Archiver) RunTrimmer(ctx context.Context) error {
	a.runTrimmer(ctx)
	return ctx.Err()
}

// runTrimmer trims every partition each TrimEvery until ctx ends.
func (a *Archiver) runTrimmer(ctx context.Context) {
	log := a.log.Named("trim")
	var bound map[int]uint64 // the archive marks of the previous round
	t := time.NewTicker(a.opts.TrimEvery)
	defer t.Stop()
	for {
		recs, err := a.st.ArchiveEpochs(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			a.trim.errors.Inc()
			log.Warn("archive marks; no trim this round", zap.Error(err))
		} else {
			marks := make(map[int]uint64, len(recs))
			for p, r := range recs {
				marks[p] = r.Archived
			}
			for p := 0; p < a.opts.Layout.InboxPartitions; p++ {
				// A stream that is not the one the mark counts in (lost,
				// recreated, restored) is numbered above it first, and never
				// trimmed by a mark of another stream (epoch.go).
				changed, err := a.checkEpoch(ctx, log, p, recs[p])
				if changed {
					a.restartPartition(p)
					delete(marks, p) // the next round's bound is the new mark
				}
				if err == nil && !changed {
					err = a.trimPartition(ctx, log, p, marks[p], bound[p], recs[p].StreamEpoch)
				}
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					a.trim.errors.Inc()
					log.Warn("trim partition", zap.Int("partition", p), zap.Error(err))
				}
			}
			bound = marks
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// trimPartition refreshes partition p's lag metrics from its archive mark
// and purges the entries of its stream that are at or below bound (an
// archive mark at least a round old) and older than the stream's hot window,
// if the stream is the one of the given epoch (the mark's).
func (a *Archiver) trimPartition(ctx context.Context, log *zap.Logger, p int, mark, bound, epoch uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	name := streams.InboxStream(p)
	s, err := a.js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("look up %s: %w", name, err)
	}
	info := s.CachedInfo()
	if epochOf(info) != epoch {
		return nil // recreated since the epoch check: the next round checks it again
	}
	state, now := info.State, time.Now()
	nc := a.js.Conn()

	label := strconv.Itoa(p)
	var lag uint64
	var age time.Duration
	if state.LastSeq > mark {
		lag = state.LastSeq - mark
		_, ts, found, err := directGet(ctx, nc, p, directGetRequest{Seq: max(mark+1, state.FirstSeq), NextFor: inboxSubjects(p)})
		if err != nil {
			return err
		}
		if found {
			age = max(now.Sub(ts), 0)
		}
	}
	a.trim.lag.WithLabelValues(label).Set(float64(lag))
	a.trim.oldest.WithLabelValues(label).Set(age.Seconds())

	window, ok, err := streams.HotWindow(info.Config)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%s records no hot window: not trimmed", name)
	}
	if bound < state.FirstSeq || state.Msgs == 0 {
		return nil // nothing archived in the stream yet, or nothing in it
	}
	// keep is the first entry that stays: the first one younger than the
	// window, or the first one after the bound.
	cutoff := now.Add(-window)
	keep, _, found, err := directGet(ctx, nc, p, directGetRequest{StartTime: &cutoff})
	if err != nil {
		return err
	}
	if !found {
		keep = state.LastSeq + 1 // every entry is older
	}
	keep = min(keep, bound+1)
	if keep <= state.FirstSeq {
		return nil
	}
	purged, err := purge(ctx, nc, name, "", keep)
	if err != nil {
		return err
	}
	a.trim.trimmed.Add(float64(purged))
	log.Debug("trimmed", zap.Int("partition", p), zap.Uint64("below_seq", keep), zap.Uint64("entries", purged),
		zap.Duration("hot_window", window), zap.Uint64("archived_seq", mark))
	return nil
}

// inboxSubjects is the subject filter of every entry of partition p.
func inboxSubjects(p int) string { return "inbox." + strconv.Itoa(p) + ".*" }

// directGetRequest is the JetStream direct get request (JSApiMsgGetRequest)
// in the forms used here: the first entry at or after Seq matching NextFor,
// or the first one stored at or after StartTime.
type directGetRequest struct {
	Seq       uint64     `json:"seq,omitempty"`
	NextFor   string     `json:"next_by_subj,omitempty"`
	StartTime *time.Time `json:"start_time,omitempty"`
}

// directGet answers req on INBOX_<p> with the sequence and the time of the
// entry found (its body is not needed); found is false when there is none.
func directGet(ctx context.Context, nc *nats.Conn, p int, req directGetRequest) (seq uint64, ts time.Time, found bool, err error) {
	b, err := json.Marshal(req)
	if err != nil {
		return 0, time.Time{}, false, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	name := streams.InboxStream(p)
	m, err := nc.RequestWithContext(ctx, "$JS.API.DIRECT.GET."+name, b)
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("direct get on %s: %w", name, err)
	}
	switch m.Header.Get("Status") {
	case "":
	case "404":
		return 0, time.Time{}, false, nil
	default:
		return 0, time.Time{}, false, fmt.Errorf("direct get on %s: status %s %s", name, m.Header.Get("Status"), m.Header.Get("Description"))
	}
	seq, err = strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("direct get on %s: bad %s header %q", name, jetstream.SequenceHeader, m.Header.Get(jetstream.SequenceHeader))
	}
	ts, err = time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer))
	if err != nil {
		return 0, time.Time{}, false, fmt.Errorf("direct get on %s: bad %s header: %w", name, jetstream.TimeStampHeaer, err)
	}
	return seq, ts, true, nil
}

// purge removes the entries of stream name below keep, only those of
// subject filter when it is not empty (one user's, for the early cleanup),
// and returns how many went. The request is JetStream's purge API on the
// syncer's connection: jetstream.Stream.Purge would cost a stream info
// call before every purge.
func purge(ctx context.Context, nc *nats.Conn, name, filter string, keep uint64) (uint64, error) {
	b, _ := json.Marshal(struct {
		Filter string `json:"filter,omitempty"`
		Seq    uint64 `json:"seq"`
	}{filter, keep})
	what := name
	if filter != "" {
		what = filter
	}
	m, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.PURGE."+name, b)
	if err != nil {
		return 0, fmt.Errorf("purge %s below %d: %w", what, keep, err)
	}
	var r struct {
		Success bool   `json:"success"`
		Purged  uint64 `json:"purged"`
		Error   *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return 0, fmt.Errorf("purge %s below %d: %w", what, keep, err)
	}
	if r.Error != nil || !r.Success {
		desc := "not successful"
		if r.Error != nil {
			desc = r.Error.Description
		}
		return 0, fmt.Errorf("purge %s below %d refused: %s", what, keep, desc)
	}
	return r.Purged, nil
}
