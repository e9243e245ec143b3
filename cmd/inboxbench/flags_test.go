package main

import (
	"bytes"
	"flag"
	"strings"
	"testing"

	"github.com/inboxd/inboxd/internal/auth"
)

// INBOXBENCH_PG (a URL with a password) still sets --pg, yet a typo or -h
// prints neither it nor the development token secret.
func TestFlagsPrintNoSecret(t *testing.T) {
	const pg = "postgres://bench:bench-pw-4b2a@db.internal:5432/postgres"
	t.Setenv("INBOXBENCH_PG", pg)
	for _, args := range [][]string{{"--userz", "5"}, {"-h"}} {
		var o opts
		fs := newFlagSet("storm", &o, flag.ContinueOnError)
		var out bytes.Buffer
		fs.SetOutput(&out)
		if err := fs.Parse(args); err == nil {
			t.Fatalf("%q: no error", args)
		}
		if !strings.Contains(out.String(), "--pg") {
			t.Errorf("%q: no usage printed:\n%s", args, out.String())
		}
		for _, v := range []string{"bench-pw-4b2a", auth.DevSecret} {
			if strings.Contains(out.String(), v) {
				t.Errorf("%q prints %q:\n%s", args, v, out.String())
			}
		}
	}
	var o opts
	if err := newFlagSet("storm", &o, flag.ContinueOnError).Parse(nil); err != nil || o.sys.pgAdmin != pg {
		t.Errorf("--pg from INBOXBENCH_PG: %q, %v", o.sys.pgAdmin, err)
	}
}
