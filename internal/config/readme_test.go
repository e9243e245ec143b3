package config

import (
	"flag"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/inboxd/inboxd/internal/auth"
	"github.com/inboxd/inboxd/internal/natsauth"
)

// The binaries and the roles node.Main gives them.
var binaries = map[string]Role{
	"inboxd":  RoleAllInOne,
	"gateway": RoleGateway,
	"fanout":  RoleFanout,
	"syncer":  RoleSyncer,

	"pushbridge": RolePushBridge,
}

// binaryNames are the keys of binaries in a stable order (for the messages).
var binaryNames = []string{"inboxd", "gateway", "fanout", "syncer", "pushbridge"}

// flagsOf registers a binary's flags the way node.Main does.
func flagsOf(binary string) *flag.FlagSet {
	c := DefaultsFor(binaries[binary])
	fs := flag.NewFlagSet(binary, flag.ContinueOnError)
	c.Register(fs, binaries[binary])
	return fs
}

// readmeRow is one row of the README's configuration table.
type readmeRow struct {
	line      int
	flags     []string          // without the leading --
	scope     string            // "inboxd", "services", "fanout" or "" (every binary with the flag)
	values    []string          // the backticked defaults, one per flag
	words     string            // a default in words ("none", "development secret")
	perBinary map[string]string // "(fanout 7073, syncer 7074)": the port of those binaries
	env       [][]string        // the environment variables in brackets: per flag (", "), its names (" or ")
}

var (
	backticked = regexp.MustCompile("`([^`]*)`")
	flagName   = regexp.MustCompile("^--([a-z0-9-]+)$")
	scopeRe    = regexp.MustCompile(`\((\w+)\)\s*$`)
	envRe      = regexp.MustCompile(`\[([^\]]*)\]`)
	perBinRe   = regexp.MustCompile(`\((\w+ \d+(?:, \w+ \d+)*)\)`)
)

// readmeConfigTable parses the table under "## Configuration" in README.md.
func readmeConfigTable(t *testing.T) []readmeRow {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var rows []readmeRow
	in := false
	for i, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "## "):
			in = l == "## Configuration"
			continue
		case !in || !strings.HasPrefix(l, "| `--"):
			continue
		}
		cells := strings.Split(l, "|")
		if len(cells) < 4 {
			t.Fatalf("README.md:%d: not a table row: %s", i+1, l)
		}
		r := readmeRow{line: i + 1, perBinary: map[string]string{}}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			if f := flagName.FindStringSubmatch(m[1]); f != nil {
				r.flags = append(r.flags, f[1])
			}
		}
		if m := scopeRe.FindStringSubmatch(cells[1]); m != nil {
			r.scope = m[1]
		}
		def := cells[2]
		if m := envRe.FindStringSubmatch(def); m != nil {
			for _, group := range strings.Split(m[1], ", ") {
				var names []string
				for _, e := range backticked.FindAllStringSubmatch(group, -1) {
					names = append(names, e[1])
				}
				r.env = append(r.env, names)
			}
			def = strings.Replace(def, m[0], "", 1)
		}
		if m := perBinRe.FindStringSubmatch(def); m != nil {
			for _, pair := range strings.Split(m[1], ", ") {
				name, port, _ := strings.Cut(pair, " ")
				r.perBinary[name] = port
			}
			def = strings.Replace(def, m[0], "", 1)
		}
		for _, m := range backticked.FindAllStringSubmatch(def, -1) {
			r.values = append(r.values, m[1])
		}
		r.words = strings.TrimSpace(backticked.ReplaceAllString(def, ""))
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatal("README.md: no configuration table found under ## Configuration")
	}
	return rows
}

// The defaults the README's configuration table documents are the real
// ones (what the binaries' flags default to and their help shows), each
// flag is registered by the binaries the row names, every flag of every
// binary is in the table, and every flag's environment variables are
// named there and set it.
func TestREADMEConfigTableMatchesFlags(t *testing.T) {
	rows := readmeConfigTable(t)
	flagSets := map[string]*flag.FlagSet{}
	for _, b := range binaryNames {
		flagSets[b] = flagsOf(b)
	}
	documented := map[string]bool{}
	for _, r := range rows {
		if len(r.flags) == 0 {
			t.Errorf("README.md:%d: no flag in the first column", r.line)
			continue
		}
		for i, name := range r.flags {
			documented[name] = true
			checkScope(t, r, name, flagSets)
			for _, b := range binaryNames {
				f := flagSets[b].Lookup(name)
				if f == nil {
					continue
				}
				want, ok := r.defaultFor(t, i, b)
				if !ok {
					continue
				}
				if err := f.Value.Set(want); err != nil {
					t.Errorf("README.md:%d: --%s default %q: %v", r.line, name, want, err)
					continue
				}
				// Set and String normalise the README's form (168h, 5) to
				// the flag's (168h0m0s, 5) before comparing.
				if got := f.Value.String(); got != f.DefValue {
					t.Errorf("README.md:%d: %s --%s: README says default %q, the flag's is %q", r.line, b, name, want, f.DefValue)
				}
			}
		}
		checkEnv(t, r)
	}
	for _, b := range binaryNames {
		flagSets[b].VisitAll(func(f *flag.Flag) {
			if !documented[f.Name] {
				t.Errorf("%s --%s (default %q) is not in the README's configuration table", b, f.Name, f.DefValue)
			}
		})
	}
}

// defaultFor is the default the row documents for its i-th flag in binary,
// and false when the row gives none to compare (checked otherwise).
func (r readmeRow) defaultFor(t *testing.T, i int, binary string) (string, bool) {
	t.Helper()
	name := r.flags[i]
	switch {
	case name == "nats-user" || name == "nats-password":
		// Worked out at start from the service's role (internal/node), so
		// the flags default to empty; the README's development password
		// must be natsauth's.
		for _, v := range r.values {
			if strings.Contains(v, "<role>") && !strings.Contains(v, "$") {
				if dev := strings.ReplaceAll(v, "<role>", "gateway"); dev != natsauth.DevPassword(natsauth.Gateway) {
					t.Errorf("README.md:%d: development password %q, natsauth's is %q", r.line, dev, natsauth.DevPassword(natsauth.Gateway))
				}
			}
		}
		return "", true
	case len(r.values) == len(r.flags):
		v := r.values[i]
		if port, ok := r.perBinary[binary]; ok {
			host, _, _ := strings.Cut(v, ":")
			v = host + ":" + port
		}
		return v, true
	case len(r.values) == 0 && r.words == "none":
		return "", true
	case len(r.values) == 0 && r.words == "development secret":
		return auth.DevSecret, true
	}
	t.Errorf("README.md:%d: cannot read a default per flag from %d values and %q", r.line, len(r.values), r.words)
	return "", false
}

// checkScope checks that the binaries the row names register the flag.
func checkScope(t *testing.T, r readmeRow, name string, flagSets map[string]*flag.FlagSet) {
	t.Helper()
	var want []string
	switch r.scope {
	case "":
	case "services":
		want = []string{"gateway", "fanout", "syncer"}
	default:
		want = []string{r.scope}
	}
	for _, b := range want {
		fs, ok := flagSets[b]
		if !ok {
			t.Errorf("README.md:%d: no binary %q", r.line, b)
			continue
		}
		if fs.Lookup(name) == nil {
			t.Errorf("README.md:%d: %s has no flag --%s", r.line, b, name)
		}
	}
	if r.scope == "" && !slices.ContainsFunc(binaryNames, func(b string) bool { return flagSets[b].Lookup(name) != nil }) {
		t.Errorf("README.md:%d: no binary has a flag --%s", r.line, name)
	}
}

// checkEnv checks that the row names every environment variable of each of
// its flags (EnvVars, in its order), and that each sets its flag through
// Parse in every binary that has the flag.
func checkEnv(t *testing.T, r readmeRow) {
	t.Helper()
	if len(r.env) != len(r.flags) {
		t.Errorf("README.md:%d: environment variables of %d flags in brackets for %d flags (one group per flag, names within it joined by \" or \")", r.line, len(r.env), len(r.flags))
		return
	}
	for i, names := range r.env {
		name := r.flags[i]
		if want := EnvVars(name); !slices.Equal(names, want) {
			t.Errorf("README.md:%d: --%s: environment %q, want %q", r.line, name, names, want)
			continue
		}
		for _, e := range names {
			t.Run(e, func(t *testing.T) {
				for _, b := range binaryNames {
					if flagsOf(b).Lookup(name) == nil {
						continue
					}
					v := sample(t, binaries[b], name)
					t.Setenv(e, v)
					fs := flagsOf(b)
					if err := Parse(fs, nil); err != nil {
						t.Errorf("README.md:%d: %s %s=%s: %v", r.line, b, e, v, err)
						continue
					}
					if f := fs.Lookup(name); f.Value.String() == f.DefValue {
						t.Errorf("README.md:%d: %s=%s leaves %s --%s at its default %q", r.line, e, v, b, name, f.DefValue)
					}
				}
			})
		}
	}
}
