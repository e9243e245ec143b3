package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/inboxd/inboxd/internal/admin"
)

// userCmd runs `inboxctl user <sub>`: revoke (below) or delete
// (user_delete.go).
func userCmd(ctx context.Context, sub string, args []string) int {
	switch sub {
	case "revoke":
		return userRevokeCmd(ctx, args)
	case "delete":
		return userDeleteCmd(ctx, args)
	}
	return fail(fmt.Errorf("unknown user command %q: want revoke or delete", sub))
}

// userRevokeCmd runs `inboxctl user revoke --uid U [--device D]`: the
// device (without --device, every device of the user) is revoked. It prints
// {"uid":U,"device":D,"revoked_at_ms":T} and exits 0 once the revocation is
// recorded and announced: the device's open connections close with
// REVOKED on every gateway, its tokens issued up to then are refused, and
// a token issued from the next second on works.
func userRevokeCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("user revoke", flag.ContinueOnError)
	var c conn
	c.register(fs)
	uid := fs.Int64("uid", 0, "the user to revoke")
	device := fs.String("device", "", "the device to revoke (default: every device of the user)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *uid <= 0 {
		return fail(errors.New("user revoke needs --uid"))
	}
	nc, err := c.connectNATS()
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	r, err := (&admin.Client{NC: nc}).Revoke(ctx, admin.RevokeRequest{UID: *uid, Device: *device})
	if err != nil {
		return adminFail(err)
	}
	emit(r)
	return 0
}
