// Package chaos is inboxd's fault-injection suite: gateway, fanout, syncer
// and a NATS server as separate processes, Postgres, and a workload of users,
// conversations and devices, while processes are killed, servers restarted
// and connections cut; then an oracle checks that nothing was lost,
// duplicated, reordered or invented.
//
//	make chaos                  long run (INBOXD_CHAOS=long)
//	INBOXD_CHAOS=short go test ./internal/chaos/   the short run make test does
//
// Without INBOXD_CHAOS the test skips (it restarts the shared Postgres, so
// it must not run beside other packages).
package chaos
