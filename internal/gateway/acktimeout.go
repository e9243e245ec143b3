package gateway

import (
	"time"

	"go.uber.org/zap"
)

// A device that stays connected but stops confirming (a stuck app, a lost
// ack) would hold what it was handed until it reconnects: the cursor waits
// for it, and with the window full no more backfill comes. So a batch that
// awaits confirmation longer than AckTimeout makes the session take back
// everything unconfirmed and hand it over again from the cursor (repeats,
// never skips; the client drops repeats by msg_id). The timeout follows
// the heartbeat (3 of them, the read deadline's length): a fixed short one
// declares slow phones dead and makes them fetch everything again, none at
// all leaves messages in limbo. A dead connection is closed by the read
// deadline, which ends the session anyway.

// armAckTimerLocked makes checkAcks run after d unless it is due already.
func (s *session) armAckTimerLocked(d time.Duration) {
	if s.ackArmed || s.closed {
		return
	}
	s.ackArmed = true
	if s.ackTimer == nil {
		s.ackTimer = time.AfterFunc(d, s.checkAcks)
	} else {
		s.ackTimer.Reset(d)
	}
}

// checkAcks takes back what the device left unconfirmed too long, or looks
// again when the oldest batch is due.
func (s *session) checkAcks() {
	s.mu.Lock()
	s.ackArmed = false
	oldest, ok := s.led.Oldest()
	if s.closed || !ok {
		s.ackTimer = nil // a caught-up session holds no timer
		s.mu.Unlock()
		return
	}
	if wait := s.g.opts.AckTimeout - time.Since(oldest); wait > 0 {
		s.armAckTimerLocked(wait)
		s.mu.Unlock()
		return
	}
	n := s.led.TakeBack()
	s.tail.skipped() // the backfill starts again at the cursor: the consumer is repositioned there
	cursor := s.led.Cursor()
	s.mu.Unlock()
	s.g.metrics.ackTimeouts.Inc()
	s.g.log.Info("device left entries unconfirmed past the ack timeout; handing them over again",
		zap.Int64("uid", s.uid), zap.String("device", s.device), zap.Int("entries", n),
		zap.Uint64("cursor", cursor), zap.Duration("waited", time.Since(oldest)))
	s.poke()
}
