package main

import (
	"errors"
	"flag"
	"time"

	"github.com/inboxd/inboxd/internal/auth"
)

func tokenCmd(args []string) int {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	var c conn
	c.register(fs)
	uid := fs.Int64("uid", 0, "uid")
	device := fs.String("device", "", "device id")
	ttl := fs.Duration("ttl", 24*time.Hour, "validity")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *uid <= 0 || *device == "" {
		return fail(errors.New("token needs --uid and --device"))
	}
	tok, err := auth.NewSigner(c.secret).Issue(*uid, *device, *ttl)
	if err != nil {
		return fail(err)
	}
	emit(struct {
		Token string `json:"token"`
	}{tok})
	return 0
}
