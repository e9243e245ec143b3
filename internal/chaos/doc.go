// Package chaos is inboxd's fault-injection suite: gateway, fanout, syncer
// and a NATS server as separate processes, Postgres, and a workload of users,
// conversations and devices, while processes are killed, servers restarted
// and connections cut; then an oracle checks that nothing was lost,
// duplicated, reordered or invented.
//
//	make chaos                  long run (INBOXD_CHAOS=long)
//	INBOXD_CHAOS=short go test ./internal/chaos/   the short run make test does
//
// Without INBOXD_CHAOS the test skips: it restarts the Postgres cluster
// that serves INBOXD_TEST_DATABASE_URL (the local cluster listening on its
// port, per pg_lsclusters), so it must not run beside other packages using
// that cluster. To keep a shared cluster out of it, give the suite its own
// (with a role inboxd, password inboxd, that may create databases):
//
//	pg_createcluster 15 chaos --port 5433 -- --auth=trust && pg_ctlcluster 15 chaos start
//	INBOXD_TEST_DATABASE_URL=postgres://inboxd:inboxd@127.0.0.1:5433/postgres?sslmode=disable INBOXD_CHAOS=short go test ./internal/chaos/
//
// TestChaosCluster (cluster_test.go) runs the same workload and oracle on a
// three-node NATS cluster with R3 streams, two gateways and two fanouts,
// SIGKILLing the node that leads SEND and an INBOX partition:
//
//	make chaos-cluster                                    long run (INBOXD_CHAOS_CLUSTER=long; restarts Postgres)
//	INBOXD_CHAOS_CLUSTER=short go test -run '^TestChaosCluster$' ./internal/chaos/   the short run make test does (leaves Postgres alone)
//
// A run fails unless it injected every fault kind it claims at least once
// and brought some device back offline too long (newest page first).
package chaos
