// Command inboxd is the all-in-one inboxd: embedded NATS JetStream, gateway,
// fanout and syncer in one process. With --nats-only it runs just the
// embedded NATS server (split deployments and fault tests use that).
package main

import (
	"os"
	"slices"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/node"
)

func main() {
	roles := config.RoleEmbeddedNATS | config.RoleGateway | config.RoleFanout | config.RoleSyncer
	if i := slices.Index(os.Args, "--nats-only"); i > 0 {
		os.Args = slices.Delete(os.Args, i, i+1)
		roles = config.RoleEmbeddedNATS
	}
	node.Main("inboxd", roles, nil)
}
