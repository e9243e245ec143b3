package bridge

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"
)

// A relay verifies the signature by recomputing HMAC-SHA256 over
// "<t>.<body>" with the shared secret.
func TestSignIsHMACOverTimeAndBody(t *testing.T) {
	body := []byte(`{"id":"2:1"}`)
	at := time.Unix(1796182678, 0)
	sig := Sign("s3cret", at, body)
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write([]byte("1796182678." + string(body)))
	if want := "t=1796182678,v1=" + hex.EncodeToString(mac.Sum(nil)); sig != want {
		t.Fatalf("signature %q, want %q", sig, want)
	}
	if Sign("other", at, body) == sig || Sign("s3cret", at, []byte(`{"id":"2:2"}`)) == sig {
		t.Fatal("the signature does not depend on the secret and the body")
	}
}

// Full jitter: attempt k waits below min(max, min·2^(k-1)), never
// nothing, and spreads (not one fixed value), up to attempts whose cap
// would overflow int64 if shifted (a panic before the fix).
func TestBackoffFullJitterWithinBounds(t *testing.T) {
	b := &Bridge{opts: Options{RetryMin: 100 * time.Millisecond, RetryMax: 2 * time.Second}}
	for attempt := 1; attempt <= 64; attempt++ {
		ceiling := b.opts.RetryMax
		if attempt <= 5 {
			ceiling = b.opts.RetryMin << (attempt - 1)
		}
		seen := map[time.Duration]bool{}
		for range 200 {
			d := b.backoff(attempt)
			if d <= 0 || d > ceiling+time.Millisecond {
				t.Fatalf("attempt %d: delay %s outside (0, %s]", attempt, d, ceiling)
			}
			seen[d] = true
		}
		if len(seen) < 50 {
			t.Fatalf("attempt %d: only %d distinct delays in 200: no jitter", attempt, len(seen))
		}
	}
}

// Bad settings are refused at start, naming the flag, and a URL with
// credentials is refused without printing them.
func TestOptionsValidateNamesTheFlag(t *testing.T) {
	ok := DefaultOptions()
	ok.URL = "https://relay.example/hook"
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mod  func(*Options)
		flag string
	}{
		{func(o *Options) { o.URL = "" }, "--webhook-url"},
		{func(o *Options) { o.URL = "ftp://relay/x" }, "--webhook-url"},
		{func(o *Options) { o.URL = "https://user:hunter2@relay/x" }, "--webhook-secret"},
		{func(o *Options) { o.Timeout = 0 }, "--webhook-timeout"},
		{func(o *Options) { o.MaxAttempts = 0 }, "--max-attempts"},
		{func(o *Options) { o.RetryMax = o.RetryMin / 2 }, "--retry-max"},
		{func(o *Options) { o.Concurrency = 0 }, "--concurrency"},
	} {
		o := ok
		c.mod(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), c.flag) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%+v: %v; want an error naming %s and no password", o, err, c.flag)
		}
	}
}
