// Command fanout stores sends and writes them to every member's inbox.
package main

import (
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/node"
)

func main() {
	node.Main("fanout", config.RoleFanout, nil)
}
