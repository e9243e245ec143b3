package gateway

import (
	"context"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/store"
)

// cursorMirror batches the device cursors that moved into one Postgres
// write per interval (device_cursor). The mirror may lag the device by an
// interval. A login reads it with its summary: it recreates a lost
// consumer there, and moves a consumer that is behind it up to it (during
// an archive catch-up the consumer is not moved, session.syncConsumer).
// Starting there repeats messages but never skips one.
type cursorMirror struct {
	g     *Gateway
	mu    sync.Mutex
	dirty map[devKey]store.DeviceCursor
}

type devKey struct {
	uid    int64
	device string
}

func (cm *cursorMirror) mark(c store.DeviceCursor) {
	cm.mu.Lock()
	if cm.dirty == nil {
		cm.dirty = make(map[devKey]store.DeviceCursor)
	}
	k := devKey{c.UID, c.Device}
	if old, ok := cm.dirty[k]; !ok || old.Epoch < c.Epoch || (old.Epoch == c.Epoch && old.AckSeq <= c.AckSeq) {
		cm.dirty[k] = c
	}
	cm.mu.Unlock()
}

func (cm *cursorMirror) flush(ctx context.Context) {
	cm.mu.Lock()
	d := cm.dirty
	cm.dirty = nil
	cm.mu.Unlock()
	if len(d) == 0 {
		return
	}
	cs := make([]store.DeviceCursor, 0, len(d))
	for _, c := range d {
		cs = append(cs, c)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := cm.g.st.SaveDeviceCursors(ctx, cs); err != nil {
		cm.g.log.Warn("mirror device cursors; will retry", zap.Int("devices", len(cs)), zap.Error(err))
		for _, c := range cs {
			cm.mark(c)
		}
	}
}

func (cm *cursorMirror) run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	lastTouch := time.Now()
	for {
		select {
		case <-ctx.Done():
			cm.flush(context.Background())
			return
		case <-t.C:
			// A connected device's row (last_seen_at) is refreshed even
			// when its cursor did not move.
			if time.Since(lastTouch) >= cm.g.opts.DeviceSeenEvery {
				lastTouch = time.Now()
				for _, s := range cm.g.router.all() {
					cm.mark(store.DeviceCursor{UID: s.uid, Device: s.device, Consumer: s.consumer, AckSeq: s.State().Cursor, Epoch: s.epoch.Load()})
				}
			}
			cm.flush(ctx)
		}
	}
}
