package lifecycle

import (
	"context"
	"time"
)

// SetTestHooks makes l call checkpoint before every step and batch of a
// deletion (an error stops the job there, as a crash would), wait at most
// settle for entries in flight, and work in batches of batch rows. Set it
// before the deletion is asked for.
func SetTestHooks(l *Lifecycle, checkpoint func(ctx context.Context, uid int64, step string) error, settle time.Duration, batch int) {
	l.hooks.Store(&testHooks{checkpoint: checkpoint, settle: settle, batch: batch})
}

// Held is l's answer to which of convIDs are under legal hold.
func Held(l *Lifecycle, ctx context.Context, convIDs []int64) (map[int64]bool, error) {
	return l.heldConversations(ctx, convIDs)
}

// The admin API's subjects a deletion uses (lifecycle names them itself:
// admin imports this package).
const (
	RevokeSubject = revokeSubject
	ConvChanged   = convChanged
)
