package config

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/docmarks"
)

// docs/configuration.md's table is what Reference renders from the flag
// definitions: a flag added, removed or given another default, help or
// variable without `go generate ./internal/config` fails here.
func TestConfigurationReferenceIsCurrent(t *testing.T) {
	current, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := docmarks.Replace(current, ReferenceMarks, Reference())
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != string(current) {
		t.Error("docs/configuration.md is stale: run go generate ./internal/config")
	}
}

// The reference has a row for every flag of every binary, naming each
// binary that registers it, and a flag has one help and one kind in every
// binary that has it (the reference shows one).
func TestReferenceCoversEveryFlag(t *testing.T) {
	ref := Reference()
	rows := map[string]string{}
	for _, l := range strings.Split(ref, "\n") {
		if name, _, ok := strings.Cut(strings.TrimPrefix(l, "| `--"), "`"); ok && strings.HasPrefix(l, "| `--") {
			rows[name] = l
		}
	}
	help := map[string]string{}
	for _, b := range Binaries() {
		c := DefaultsFor(b.Roles)
		fs := flag.NewFlagSet(b.Name, flag.ContinueOnError)
		c.Register(fs, b.Roles)
		fs.VisitAll(func(f *flag.Flag) {
			row, ok := rows[f.Name]
			if !ok {
				t.Errorf("%s --%s has no row", b.Name, f.Name)
				return
			}
			if cells := strings.Split(row, " | "); len(cells) < 6 || (cells[4] != "all" && !strings.Contains(", "+cells[4]+",", ", "+b.Name+",")) {
				t.Errorf("--%s: row does not name %s: %s", f.Name, b.Name, row)
			}
			if h, ok := help[f.Name]; ok && h != f.Usage {
				t.Errorf("--%s: help differs between binaries: %q and %q", f.Name, h, f.Usage)
			}
			help[f.Name] = f.Usage
		})
	}
	if len(rows) != len(help) {
		t.Errorf("%d rows for %d flags", len(rows), len(help))
	}
	for _, secret := range []string{auth.DevSecret, "inboxd:inboxd@", "inboxd-gateway-dev"} {
		if strings.Contains(ref, secret) {
			t.Errorf("the reference shows %q", secret)
		}
	}
}
