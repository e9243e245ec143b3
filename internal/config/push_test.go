package config

import (
	"strings"
	"testing"
	"time"
)

// A syncer with --push refuses a --push-after below the cursor flush, and
// the push bridge's webhook settings reach its options.
func TestPushSettings(t *testing.T) {
	c := DefaultsFor(RoleSyncer)
	if c.Push {
		t.Fatal("--push is on by default")
	}
	c.Push, c.PushAfter = true, 500*time.Millisecond
	if err := c.ValidateSyncer(); err == nil || !strings.Contains(err.Error(), "--push-after") {
		t.Fatalf("push-after 500ms: %v", err)
	}
	c.Push = false
	if err := c.ValidateSyncer(); err != nil {
		t.Fatalf("push off, push-after ignored: %v", err)
	}
	b := DefaultsFor(RolePushBridge)
	b.WebhookURL, b.WebhookSecret = "https://relay/x", "k"
	if o := b.BridgeOptions(); o.URL != b.WebhookURL || o.Secret != "k" || o.MaxAttempts != 20 || o.Validate() != nil {
		t.Fatalf("bridge options %+v", o)
	}
	if b.HTTPAddr != "127.0.0.1:7075" {
		t.Fatalf("pushbridge --http %s", b.HTTPAddr)
	}
}
