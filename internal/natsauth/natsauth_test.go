package natsauth

import (
	"os"
	"testing"
)

// deploy/nats/auth.conf is rendered from this package's table.
func TestDeployConfMatchesTable(t *testing.T) {
	b, err := os.ReadFile("../../deploy/nats/auth.conf")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != Conf(16) {
		t.Fatal("deploy/nats/auth.conf differs from the permissions table: run `go run ./cmd/inboxctl nats-conf > deploy/nats/auth.conf`")
	}
}
