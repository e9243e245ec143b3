package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The syncer's housekeeping settings: their flags set them, 0 turns each
// off, a negative one or a --device-forget not above --device-reap is
// refused with the flags named.
func TestLifecycleSettings(t *testing.T) {
	c, _, err := parse(t, RoleSyncer, "--device-forget", "100h", "--reject-horizon", "0s", "--housekeeping-every", "5m", "--device-reap", "24h")
	if err != nil {
		t.Fatal(err)
	}
	if c.DeviceForget != 100*time.Hour || c.RejectHorizon != 0 || c.HousekeepingEvery != 5*time.Minute || c.DeviceReap != 24*time.Hour {
		t.Fatalf("parsed %v %v %v %v", c.DeviceForget, c.RejectHorizon, c.HousekeepingEvery, c.DeviceReap)
	}
	if err := c.Validate(); err != nil || c.ValidateSyncer() != nil {
		t.Fatalf("valid settings refused: %v %v", err, c.ValidateSyncer())
	}
	d := Defaults()
	if err := d.ValidateSyncer(); err != nil || d.DeviceForget <= d.DeviceReap {
		t.Fatalf("defaults: forget %s, reap %s: %v", d.DeviceForget, d.DeviceReap, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--device-forget", "30m"}, "--device-forget 30m0s must exceed --device-reap 1h0m0s"},
		{[]string{"--housekeeping-every", "-1s"}, "must not be negative"},
		{[]string{"--reject-horizon", "-1h"}, "must not be negative"},
	} {
		c, _, err := parse(t, RoleAllInOne, tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		if err := errors.Join(c.Validate(), c.ValidateSyncer()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
	if c, _, err := parse(t, RoleSyncer, "--device-forget", "0s"); err != nil || c.ValidateSyncer() != nil {
		t.Errorf("--device-forget 0s (never) refused: %v %v", err, c.ValidateSyncer())
	}
	// A gateway has --device-reap but no --device-forget: a long reap is
	// its own business.
	if c, _, err := parse(t, RoleGateway, "--device-reap", "3000h"); err != nil || c.Validate() != nil {
		t.Errorf("a gateway's --device-reap 3000h refused: %v %v", err, c.Validate())
	}
}
