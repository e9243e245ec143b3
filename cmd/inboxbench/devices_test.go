package main

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// devicesContract lists the fields of `inboxbench devices --nodes N --json`
// that other tooling reads (docs/benchmarks.md, "JSON contract").
var devicesContract = []string{"nodes", "replicas", "registered", "online", "heap_bytes_per_registered_device",
	"rss_bytes_per_registered_device", "store_files_per_registered_device", "consumers_steady", "nats_stop_ms",
	"nats_start_ms", "live_again_ms", "week_offline_login_ms"}

// TestQuickDevices runs the devices scenario on one NATS server in quick
// mode: the contract's fields are there, every online device was live
// again after the restart, and the reap left no consumer of an offline
// device. Never speed.
func TestQuickDevices(t *testing.T) {
	if testing.Short() {
		t.Skip("starts whole systems")
	}
	stdout := &runBench(t, 3*time.Minute, "", "devices", "--quick", "--nodes", "1").stdout
	var m map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &m); err != nil {
		t.Fatalf("not one JSON object: %q: %v", stdout.String(), err)
	}
	t.Logf("%s", stdout.String())
	for _, f := range devicesContract {
		if _, ok := m[f].(float64); !ok {
			t.Errorf("field %q missing or not a number: %v", f, m[f])
		}
	}
	if m["scenario"] != "devices" || m["live_again_devices"] != m["online"] {
		t.Errorf("scenario %v: %v of %v online devices live again after the restart", m["scenario"], m["live_again_devices"], m["online"])
	}
	// Connected devices idle past the (quick: 5 s) reap may lose theirs
	// too; an offline device must not hold one.
	c, _ := m["consumers_steady"].(float64)
	if o, _ := m["online"].(float64); c > o {
		t.Errorf("%v device consumers after the reap with %v devices online: offline devices' consumers were not reaped", c, o)
	}
}
