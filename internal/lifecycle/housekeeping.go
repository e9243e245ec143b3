package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/streams"
)

// housekeepingLock makes one syncer at a time do a pass (several would
// only repeat each other's work).
const housekeepingLock = "inboxd.housekeeping"

// reapGrace is added to --device-reap before a consumer that the server
// should have reaped counts as left over: the server's inactivity clock
// and last_seen_at (refreshed every --device-seen-every while connected)
// are not the same clock.
const reapGrace = time.Hour

// HousekeepingReport is what one pass removed.
type HousekeepingReport struct {
	Devices, DeviceBytes int64 // device_cursor rows of forgotten devices, and the bytes they held
	Rejects, RejectBytes int64 // send_reject rows past the horizon
	Forgotten, Unreaped  int64 // consumers deleted: of forgotten devices; left over after the reap period
	Skipped              bool  // another syncer was doing a pass
}

// firstPassAfter is when the first pass runs after start (or Every, when
// shorter): a syncer restarted more often than Every still housekeeps.
const firstPassAfter = time.Minute

func (l *Lifecycle) runHousekeeping(ctx context.Context) {
	if l.opts.Every <= 0 {
		return
	}
	next := time.NewTimer(min(firstPassAfter, l.opts.Every))
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-next.C:
		}
		if _, err := l.Housekeep(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("housekeeping pass failed part way; the next pass goes on", zap.Error(err))
		}
		next.Reset(l.opts.Every)
	}
}

// Housekeep does one pass: it forgets devices unseen longer than
// DeviceForget (row and consumer), deletes device consumers left over
// after DeviceReap, and send_reject rows past RejectHorizon, each in
// batches of Batch rows. Each part goes on while the others fail; the
// first error is returned.
func (l *Lifecycle) Housekeep(ctx context.Context) (HousekeepingReport, error) {
	var r HousekeepingReport
	release, ok, err := l.st.TryLock(ctx, housekeepingLock)
	if err != nil {
		l.m.hkErrors.Inc()
		return r, err
	}
	if !ok {
		r.Skipped = true
		return r, nil
	}
	defer release()
	start := time.Now()
	errs := []error{
		l.forgetDevices(ctx, start, &r),
		l.deleteUnreaped(ctx, start, &r),
		l.expireRejects(ctx, start, &r),
	}
	err = errors.Join(errs...)
	if err != nil {
		l.m.hkErrors.Inc()
	}
	l.m.hkLastRun.Set(float64(time.Now().Unix()))
	l.m.hkDuration.Set(time.Since(start).Seconds())
	l.log.Debug("housekeeping pass", zap.Int64("devices_forgotten", r.Devices), zap.Int64("rejects_expired", r.Rejects),
		zap.Int64("consumers_forgotten", r.Forgotten), zap.Int64("consumers_unreaped", r.Unreaped), zap.Duration("took", time.Since(start)))
	return r, err
}

// forgetDevices deletes the rows of devices unseen longer than
// DeviceForget, and their consumers where any is left.
func (l *Lifecycle) forgetDevices(ctx context.Context, now time.Time, r *HousekeepingReport) error {
	if l.opts.DeviceForget <= 0 {
		return nil
	}
	cutoff := now.Add(-l.opts.DeviceForget)
	for {
		gone, bytes, err := l.st.ForgetDevices(ctx, cutoff, l.batch())
		if err != nil {
			return err
		}
		r.Devices += int64(len(gone))
		r.DeviceBytes += bytes
		l.m.hkRows.WithLabelValues("device_cursor").Add(float64(len(gone)))
		l.m.hkBytes.WithLabelValues("device_cursor").Add(float64(bytes))
		for _, c := range gone {
			stream := streams.InboxStream(ids.Partition(c.UID, l.opts.Layout.InboxPartitions))
			err := l.js.DeleteConsumer(ctx, stream, c.Consumer)
			if errors.Is(err, jetstream.ErrConsumerNotFound) {
				continue // reaped by the server, as it should be
			}
			if err != nil {
				return fmt.Errorf("delete consumer %s of a forgotten device: %w", c.Consumer, err)
			}
			r.Forgotten++
			l.m.hkConsumers.WithLabelValues("forgotten").Inc()
		}
		l.log.Debug("housekeeping: forgotten devices", zap.Int("rows", len(gone)), zap.Int64("bytes", bytes))
		if len(gone) < l.batch() {
			return nil
		}
	}
}

// deleteUnreaped deletes device consumers whose device was unseen longer
// than DeviceReap (and reapGrace): the server reaps a consumer unused for
// its inactive threshold, but its clock starts again at every server
// restart, and a consumer created with an older, longer --device-reap
// keeps that one. Their rows stay: the cursor is recreated from them.
func (l *Lifecycle) deleteUnreaped(ctx context.Context, now time.Time, r *HousekeepingReport) error {
	if l.opts.DeviceReap <= 0 {
		return nil
	}
	cutoff := now.Add(-l.opts.DeviceReap - reapGrace)
	for p := 0; p < l.opts.Layout.InboxPartitions; p++ {
		stream := streams.InboxStream(p)
		s, err := l.js.Stream(ctx, stream)
		if err != nil {
			return fmt.Errorf("stream %s: %w", stream, err)
		}
		var names []string
		lister := s.ConsumerNames(ctx)
		for name := range lister.Name() {
			if strings.HasPrefix(name, "d_") {
				names = append(names, name)
			}
		}
		if err := lister.Err(); err != nil {
			return fmt.Errorf("consumers of %s: %w", stream, err)
		}
		for len(names) > 0 {
			chunk := names[:min(len(names), l.batch())]
			names = names[len(chunk):]
			unseen, err := l.st.UnseenConsumers(ctx, chunk, cutoff)
			if err != nil {
				return err
			}
			for _, name := range unseen {
				err := s.DeleteConsumer(ctx, name)
				if errors.Is(err, jetstream.ErrConsumerNotFound) {
					continue
				}
				if err != nil {
					return fmt.Errorf("delete consumer %s left after the reap period: %w", name, err)
				}
				r.Unreaped++
				l.m.hkConsumers.WithLabelValues("unreaped").Inc()
			}
		}
	}
	return nil
}

// expireRejects deletes send_reject rows older than RejectHorizon.
func (l *Lifecycle) expireRejects(ctx context.Context, now time.Time, r *HousekeepingReport) error {
	if l.opts.RejectHorizon <= 0 {
		return nil
	}
	cutoff := now.Add(-l.opts.RejectHorizon)
	for {
		n, bytes, err := l.st.ExpireRejects(ctx, cutoff, l.batch())
		if err != nil {
			return err
		}
		r.Rejects += n
		r.RejectBytes += bytes
		l.m.hkRows.WithLabelValues("send_reject").Add(float64(n))
		l.m.hkBytes.WithLabelValues("send_reject").Add(float64(bytes))
		l.log.Debug("housekeeping: expired send rejects", zap.Int64("rows", n), zap.Int64("bytes", bytes))
		if n < int64(l.batch()) {
			return nil
		}
	}
}
