// Command gateway serves inboxd clients over WebSocket and raw TCP.
package main

import (
	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/node"
)

func main() {
	node.Main("gateway", config.RoleGateway, nil)
}
