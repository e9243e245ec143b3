// Command syncer runs inboxd's background and admin services: the admin API
// (NATS micro service inboxd-admin).
package main

import (
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/node"
)

func main() {
	node.Main("syncer", config.RoleSyncer, nil)
}
