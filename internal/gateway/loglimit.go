package gateway

import (
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// logLimiter bounds a repetitive log line (failed logins, events given up)
// to a few a second: a storm of them (a reconnect wave with expired
// tokens, a long NATS outage) must not flood the log. The lines it lets
// through say how many were suppressed since the previous one.
type logLimiter struct {
	lim        *rate.Limiter
	suppressed atomic.Int64
	now        func() time.Time // time.Now; a test's clock
}

func newLogLimiter(perSecond int) *logLimiter {
	return &logLimiter{lim: rate.NewLimiter(rate.Limit(perSecond), perSecond), now: time.Now}
}

// allow reports whether a line may be logged now and how many were
// suppressed before it.
func (l *logLimiter) allow() (bool, int64) {
	if !l.lim.AllowN(l.now(), 1) {
		l.suppressed.Add(1)
		return false, 0
	}
	return true, l.suppressed.Swap(0)
}
