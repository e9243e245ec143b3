package e2e

import (
	"testing"
	"time"

	"github.com/inboxd/inboxd/internal/config"
	"github.com/inboxd/inboxd/internal/testenv"
	"github.com/inboxd/inboxd/internal/testenv/testnode"
)

// A connection silent after its login (3 heartbeats) and one that never
// says hello (the hello timeout) are told apart in the metrics; both still
// count in inboxd_gateway_timeouts_total.
func TestTimeoutsCountedByKind(t *testing.T) {
	cfg := testnode.Config(t, testenv.Database(t))
	cfg.Heartbeat = time.Second
	n := testnode.StartNode(t, cfg, config.RoleAllInOne)
	silent := dialRaw(t, n.Gateway.TCPAddr())
	silent.hello(1)
	mute := dialRaw(t, n.Gateway.TCPAddr()) // never says hello (the hello timeout is 10 s)
	if m := silent.read(); m != nil {
		t.Fatalf("unexpected frame %v", m)
	}
	deadline := time.Now().Add(5 * time.Second)
	for metric(t, n, "inboxd_gateway_heartbeat_timeouts_total") < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if hb, hello := metric(t, n, "inboxd_gateway_heartbeat_timeouts_total"), metric(t, n, "inboxd_gateway_hello_timeouts_total"); hb != 1 || hello != 0 {
		t.Fatalf("after a logged-in connection went silent: heartbeat timeouts %v, hello timeouts %v; want 1, 0", hb, hello)
	}
	_ = mute.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := mute.r.ReadByte(); err == nil {
		t.Fatal("a connection without hello got a frame")
	}
	deadline = time.Now().Add(5 * time.Second)
	for metric(t, n, "inboxd_gateway_hello_timeouts_total") < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if hb, hello := metric(t, n, "inboxd_gateway_heartbeat_timeouts_total"), metric(t, n, "inboxd_gateway_hello_timeouts_total"); hb != 1 || hello != 1 {
		t.Fatalf("after a connection sent no hello: heartbeat timeouts %v, hello timeouts %v; want 1, 1", hb, hello)
	}
	if all := metric(t, n, "inboxd_gateway_timeouts_total"); all != 2 {
		t.Fatalf("inboxd_gateway_timeouts_total %v, want 2 (it keeps counting both)", all)
	}
}
