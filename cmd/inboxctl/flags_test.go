package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/inboxd/inboxd/internal/auth"
)

// The connection flags take their values from the environment, yet a typo
// or -h prints none of them, nor the development secret; a flag still
// beats the environment.
func TestConnFlagsPrintNoSecret(t *testing.T) {
	env := map[string]string{
		"INBOXD_TOKEN_SECRET": "ctl-tok-secret-7d1e",
		"NATS_PASSWORD":       "ctl-nats-pw-7d1e",
		"NATS_URL":            "nats://admin:ctl-url-pw-7d1e@10.1.2.3:4222",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	for _, args := range [][]string{{"--uidd", "1"}, {"-h"}} {
		fs := flag.NewFlagSet("token", flag.ContinueOnError)
		var out bytes.Buffer
		fs.SetOutput(&out)
		var c conn
		c.register(fs)
		if err := fs.Parse(args); err == nil {
			t.Fatalf("%q: no error", args)
		}
		if !strings.Contains(out.String(), "--secret") {
			t.Errorf("%q: no usage printed:\n%s", args, out.String())
		}
		for _, v := range []string{"ctl-tok-secret-7d1e", "ctl-nats-pw-7d1e", "ctl-url-pw-7d1e", auth.DevSecret} {
			if strings.Contains(out.String(), v) {
				t.Errorf("%q prints %q:\n%s", args, v, out.String())
			}
		}
	}

	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	var c conn
	c.register(fs)
	if err := fs.Parse([]string{"--nats-password", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	if c.secret != env["INBOXD_TOKEN_SECRET"] || c.nats != env["NATS_URL"] || c.natsPass != "from-flag" {
		t.Errorf("secret %q, nats %q, nats password %q: want the environment's, the flag's password", c.secret, c.nats, c.natsPass)
	}
}
