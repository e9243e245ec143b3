package main

import (
	"flag"
	"fmt"

	"github.com/inboxd/inboxd/internal/natsauth"
)

// natsConfCmd prints the authorization block of nats-server for a split
// deployment (deploy/nats/auth.conf is this output for 16 partitions).
func natsConfCmd(args []string) int {
	fs := flag.NewFlagSet("nats-conf", flag.ContinueOnError)
	n := fs.Int("inbox-partitions", 16, "INBOX partitions of the installation")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fmt.Print(natsauth.Conf(*n))
	return 0
}
