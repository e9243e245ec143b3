package natsauth

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/inboxd/inboxd/internal/fanout"
	"github.com/inboxd/inboxd/internal/lease"
	"github.com/inboxd/inboxd/internal/streams"
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

// deploy/nats/inboxd.conf is a configuration nats-server accepts (what
// `nats-server -t -c` checks), and the users it defines have the
// permissions the embedded server gives them.
func TestDeployConfParses(t *testing.T) {
	for _, r := range Roles {
		t.Setenv("INBOXD_NATS_PASSWORD_"+strings.ToUpper(string(r)), "pw-"+string(r))
	}
	opts, err := server.ProcessConfigFile("../../deploy/nats/inboxd.conf")
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Users) != len(Roles) {
		t.Fatalf("%d users in deploy/nats, want %d", len(opts.Users), len(Roles))
	}
	for _, u := range opts.Users {
		r := Role(u.Username)
		if u.Password != "pw-"+u.Username {
			t.Errorf("%s: password not taken from $INBOXD_NATS_PASSWORD_%s", r, strings.ToUpper(u.Username))
		}
		if want := Permissions(r, 16); !reflect.DeepEqual(u.Permissions, want) {
			t.Errorf("%s: permissions in deploy/nats differ from the table:\n got %+v\nwant %+v", r, u.Permissions, want)
		}
	}
}

// The permissions name the streams and the archiver as the streams
// package defines them.
func TestPermissionsNameTheDefinedStreams(t *testing.T) {
	if sendStream != streams.SendStream {
		t.Errorf("natsauth names SEND %q, streams %q", sendStream, streams.SendStream)
	}
	if c, err := streams.ArchiverConsumerConfig(); err != nil || c.Durable != archiver {
		t.Errorf("natsauth names the archiver %q, jetstream/ %q (%v)", archiver, c.Durable, err)
	}
	if c, err := streams.PusherConsumerConfig(time.Now(), 0); err != nil || c.Durable != pusher || c.PriorityGroups[0] != streams.PusherGroup {
		t.Errorf("natsauth names the pusher %q, jetstream/ %q (%v)", pusher, c.Durable, err)
	}
	if c, err := streams.PushBridgeConsumerConfig(); err != nil || c.Durable != pushBridge || pushStream != streams.PushStream {
		t.Errorf("natsauth names the bridge %q on %q, jetstream/ %q on %q (%v)", pushBridge, pushStream, c.Durable, streams.PushStream, err)
	}
	for p, st := range inboxStreams(4) {
		if st != streams.InboxStream(p) {
			t.Errorf("natsauth names partition %d %q, streams %q", p, st, streams.InboxStream(p))
		}
	}
	// A device consumer's create subject carries its one-user filter
	// (the gateway's grant relies on it).
	if c, err := streams.DeviceConsumerConfig(3, 42, "phone", 0, 0); err != nil || c.FilterSubject != "inbox.3.42" || len(c.FilterSubjects) != 0 {
		t.Errorf("device consumer filter %q %v (%v), want the single subject inbox.3.42", c.FilterSubject, c.FilterSubjects, err)
	}
}

// The permissions name the leases bucket and keys as the lease package
// and the fanout write them.
func TestPermissionsNameTheLeases(t *testing.T) {
	if leaseBucket != lease.Bucket {
		t.Errorf("natsauth names the leases bucket %q, lease %q", leaseBucket, lease.Bucket)
	}
	if !server.SubjectsCollide("$KV."+leaseBucket+"."+leaseNodeKeys, "$KV."+lease.Bucket+"."+fanout.NodeIDKey(17)) {
		t.Errorf("natsauth's node id keys %q do not cover the fanout's %q", leaseNodeKeys, fanout.NodeIDKey(17))
	}
}
