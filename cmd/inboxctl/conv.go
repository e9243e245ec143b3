package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/inboxd/inboxd/internal/admin"
)

func convCmd(ctx context.Context, sub string, args []string) int {
	fs := flag.NewFlagSet("conv "+sub, flag.ContinueOnError)
	var c conn
	c.register(fs)
	var members int64List
	var convID int64
	var group, share, off, human bool
	switch sub {
	case "create":
		fs.Var(&members, "members", "comma-separated uids")
		fs.BoolVar(&group, "group", false, "create a group (default: a direct conversation of exactly two members)")
		fs.BoolVar(&share, "share-history", false, "members who join later see earlier messages")
	case "add", "remove":
		fs.Int64Var(&convID, "conv", 0, "conversation id")
		fs.Var(&members, "members", "comma-separated uids")
	case "show":
		fs.Int64Var(&convID, "conv", 0, "conversation id")
		fs.BoolVar(&human, "human", false, "print a readable table instead of JSON")
	case "hold":
		fs.Int64Var(&convID, "conv", 0, "conversation id")
		fs.BoolVar(&off, "off", false, "lift the hold (retention removes what is past the horizon at its next run)")
	default:
		return fail(fmt.Errorf("unknown conv command %q: want create, add, remove, show or hold", sub))
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	nc, err := c.connectNATS()
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	ac := &admin.Client{NC: nc}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	var out any
	switch sub {
	case "create":
		r, err := ac.CreateConv(ctx, admin.CreateConvRequest{Members: members, Group: group, ShareHistory: share})
		if err != nil {
			return adminFail(err)
		}
		out = struct {
			ConvID int64 `json:"conv_id"`
		}{r.ConvID}
	case "add":
		out, err = ac.AddMembers(ctx, admin.MembersRequest{ConvID: convID, Members: members})
	case "remove":
		out, err = ac.RemoveMembers(ctx, admin.MembersRequest{ConvID: convID, Members: members})
	case "show":
		var r *admin.ShowConvResponse
		if r, err = ac.ShowConv(ctx, convID); err == nil && human {
			humanConv(os.Stdout, r)
			return 0
		}
		out = r
	case "hold":
		out, err = ac.Hold(ctx, admin.HoldRequest{ConvID: convID, Hold: !off})
	}
	if err != nil {
		return adminFail(err)
	}
	emit(out)
	return 0
}

func adminFail(err error) int {
	var ae *admin.Error
	if errors.As(err, &ae) {
		emit(errorLine{Error: ae.Description, Code: ae.Code})
		return 1
	}
	return fail(err)
}
