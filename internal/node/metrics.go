package node

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/inboxd/inboxd/internal/ops"
)

// registerConnMetrics adds the state of the process's NATS connections
// and of its Postgres pools (one series per pool: send, catchup,
// background, retention) to reg. Start calls it once every connection
// is open: the collectors read the Node's fields at scrape time.
func (n *Node) registerConnMetrics(reg prometheus.Registerer) {
	reg.MustRegister(ops.NATSConnections(func() map[string]*nats.Conn {
		return map[string]*nats.Conn{"main": n.NC, "backfill": n.bulkNC, "archiver": n.archNC}
	}))
	if n.Store != nil {
		reg.MustRegister(ops.PostgresPools(func() map[string]*pgxpool.Pool {
			m := make(map[string]*pgxpool.Pool)
			for name, st := range n.Pools.byName() {
				if st != nil {
					m[name] = st.Pool
				}
			}
			return m
		}))
	}
}
