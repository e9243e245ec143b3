// Package e2e holds end-to-end tests of inboxd: whole nodes on real sockets
// with embedded nats-server and a real Postgres, driven through the public
// client package and the admin API exactly as users and tools drive them.
package e2e
