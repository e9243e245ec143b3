package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/inboxd/inboxd/internal/admin"
	"github.com/inboxd/inboxd/internal/store"
)

// userDeleteCmd runs `inboxctl user delete --uid U`: it asks the admin API
// to delete the user's data and waits until the deletion is done. It
// prints the job as a JSON line when it starts and whenever its state or
// step changes, the last one with "state":"done", and exits 0 once the
// deletion is complete — at once when it was done before. A deletion that
// does not finish within --timeout exits 1 with an error line; the syncer
// goes on with it (run the command again to wait more). --no-wait prints
// the job and exits 0 as soon as it is recorded.
func userDeleteCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("user delete", flag.ContinueOnError)
	var c conn
	c.register(fs)
	uid := fs.Int64("uid", 0, "the user whose data is deleted")
	again := fs.Bool("again", false, "run a deletion that is done once more (for data the user got after it)")
	timeout := fs.Duration("timeout", 10*time.Minute, "wait at most this long for the deletion to complete")
	noWait := fs.Bool("no-wait", false, "exit once the deletion is recorded, without waiting for it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *uid <= 0 {
		return fail(errors.New("user delete needs --uid (a positive uid)"))
	}
	nc, err := c.connectNATS()
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	ac := &admin.Client{NC: nc}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	d, err := ac.DeleteUser(ctx, admin.DeleteUserRequest{UID: *uid, Again: *again})
	if err != nil {
		return adminFail(err)
	}
	emit(d)
	last := d
	for d.State != store.DeletionDone && !*noWait {
		select {
		case <-ctx.Done():
			emit(errorLine{Error: fmt.Sprintf("the deletion of user %d is not done after %s (at step %q; it goes on: run the command again to wait)", *uid, *timeout, d.Step), Status: d.State})
			return 1
		case <-time.After(250 * time.Millisecond):
		}
		// Asking again is idempotent and answers the job's state.
		if d, err = ac.DeleteUser(ctx, admin.DeleteUserRequest{UID: *uid}); err != nil {
			if ctx.Err() != nil {
				continue // the timeout, reported above
			}
			return adminFail(err)
		}
		if d.State != last.State || d.Step != last.Step {
			emit(d)
			last = d
		}
	}
	return 0
}
