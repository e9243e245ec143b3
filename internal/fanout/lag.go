package fanout

import (
	"context"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/streams"
)

// lagEvery is how often the fanout reads its consumers' delivery state
// for the lag gauges.
const lagEvery = 5 * time.Second

// watchLag sets the delivery lag of every SEND partition this fanout
// serves until ctx ends: sends not yet STORED (the consumer's pending and
// unacknowledged messages) and, while there are any, how long the
// partition has gone without an ack. Every fanout of an installation
// reports the partitions it serves (pinned consumers: one of them
// delivers), so a dashboard takes the max per partition.
func (f *Fanout) watchLag(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for _, p := range f.opts.Partitions {
			f.readLag(ctx, p)
		}
		f.readOldest(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// readOldest sets the age of the oldest send not STORED yet: SEND is a
// work queue, so its first message is the oldest unacknowledged one, of
// any partition.
func (f *Fanout) readOldest(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := f.js.Stream(ctx, streams.SendStream)
	if err != nil {
		return
	}
	age := 0.0
	if s := st.CachedInfo().State; s.Msgs > 0 {
		age = max(0, time.Since(s.FirstTime).Seconds())
	}
	f.metrics.oldest.Set(age)
}

func (f *Fanout) readLag(ctx context.Context, p int) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cons, err := f.js.Consumer(ctx, streams.SendStream, streams.FanoutConsumer(p))
	if err != nil {
		if ctx.Err() == nil {
			f.log.Debug("fanout lag: consumer info", zap.Int("partition", p), zap.Error(err))
		}
		return // the gauges keep their last value; the API errors are counted
	}
	info := cons.CachedInfo()
	part := strconv.Itoa(p)
	pending := info.NumPending + uint64(info.NumAckPending)
	f.metrics.pending.WithLabelValues(part).Set(float64(pending))
	stalled := 0.0
	if pending > 0 {
		// The last ack (or, before the first, the consumer's creation).
		last := info.Created
		if info.AckFloor.Last != nil {
			last = *info.AckFloor.Last
		}
		stalled = max(0, time.Since(last).Seconds())
	}
	f.metrics.stalled.WithLabelValues(part).Set(stalled)
}
