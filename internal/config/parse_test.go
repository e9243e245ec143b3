package config

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/inboxd/inboxd/internal/auth"
)

// parse registers roles' flags on a fresh FlagSet and parses args.
func parse(t *testing.T, roles Role, args ...string) (Config, *flag.FlagSet, error) {
	t.Helper()
	c := DefaultsFor(roles)
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	c.Register(fs, roles)
	err := Parse(fs, args)
	return c, fs, err
}

// writeFile writes a config file into a temporary directory.
func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "inboxd.conf")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// A flag beats its environment variable, which beats the config file,
// which beats the default; the file may come from INBOXD_CONFIG.
func TestParsePrecedence(t *testing.T) {
	file := writeFile(t, `# a comment
log-level warn
http 127.0.0.1:9001
heartbeat 45s
--tail-scan 77 # a trailing comment
`)
	for _, viaEnv := range []bool{false, true} {
		args := []string{"--log-level", "debug"}
		if viaEnv {
			t.Setenv("INBOXD_CONFIG", file)
		} else {
			args = append(args, "--config", file)
		}
		t.Setenv("INBOXD_LOG_LEVEL", "error")
		t.Setenv("INBOXD_HTTP", "127.0.0.1:9002")
		t.Setenv("INBOXD_HEARTBEAT", "")
		c, _, err := parse(t, RoleGateway, args...)
		if err != nil {
			t.Fatal(err)
		}
		def := DefaultsFor(RoleGateway)
		for _, tc := range []struct{ what, got, want string }{
			{"flag beats env and file", c.LogLevel, "debug"},
			{"env beats file", c.HTTPAddr, "127.0.0.1:9002"},
			{"file beats default (empty env is unset)", c.Heartbeat.String(), "45s"},
			{"file with comments", strconv.Itoa(c.TailScan), "77"},
			{"default", c.WSAddr, def.WSAddr},
		} {
			if tc.got != tc.want {
				t.Errorf("config via env %v: %s: got %q, want %q", viaEnv, tc.what, tc.got, tc.want)
			}
		}
	}
}

// The legacy variables set their flags; the INBOXD_ name set to the same
// value is fine, to another value an error that shows neither value.
func TestParseLegacyEnv(t *testing.T) {
	const url = "postgres://u:legacy-pw-42@db:5432/x"
	t.Setenv("DATABASE_URL", url)
	t.Setenv("NATS_URL", "nats://10.0.0.1:4222")
	t.Setenv("NATS_USER", "gw2")
	t.Setenv("NATS_PASSWORD", "nats-pw-17")
	c, _, err := parse(t, RoleGateway)
	if err != nil {
		t.Fatal(err)
	}
	if c.DatabaseURL != url || c.NATSURL != "nats://10.0.0.1:4222" || c.NATSUser != "gw2" || c.NATSPassword != "nats-pw-17" {
		t.Errorf("legacy variables not applied: %+v", c)
	}

	t.Setenv("INBOXD_DATABASE_URL", url)
	if _, _, err := parse(t, RoleGateway); err != nil {
		t.Errorf("INBOXD_DATABASE_URL = DATABASE_URL: %v", err)
	}

	t.Setenv("INBOXD_DATABASE_URL", "postgres://u:other-pw-99@db:5432/x")
	_, _, err = parse(t, RoleGateway)
	if err == nil || !strings.Contains(err.Error(), "INBOXD_DATABASE_URL and DATABASE_URL") {
		t.Fatalf("different INBOXD_DATABASE_URL and DATABASE_URL: err %v, want one naming both", err)
	}
	if strings.Contains(err.Error(), "pw") {
		t.Errorf("the error shows a value: %v", err)
	}
	// The command line settles it.
	if c, _, err := parse(t, RoleGateway, "--database-url", "postgres://x@y/z"); err != nil || c.DatabaseURL != "postgres://x@y/z" {
		t.Errorf("--database-url with both variables set: %q, %v", c.DatabaseURL, err)
	}
}

// A malformed value is an error naming the flag and where the value came
// from, wherever it came from.
func TestParseMalformed(t *testing.T) {
	badFile := writeFile(t, "heartbeat 5x\n")
	unknownFile := writeFile(t, "hartbeat 5s\n")
	bigFile := writeFile(t, "node-id 99999999999999999999\n")
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"flag", nil, []string{"--heartbeat", "5x"}, `command line: invalid value "5x" for flag -heartbeat: invalid duration "5x"`},
		{"unknown flag", nil, []string{"--hartbeat", "5s"}, `command line: flag provided but not defined: -hartbeat`},
		{"env duration", map[string]string{"INBOXD_HEARTBEAT": "5x"}, nil, `env INBOXD_HEARTBEAT: invalid duration "5x"`},
		{"env integer", map[string]string{"INBOXD_NODE_ID": "seven"}, nil, `env INBOXD_NODE_ID: invalid integer "seven"`},
		{"env number", map[string]string{"INBOXD_SEND_RATE": "fast"}, nil, `env INBOXD_SEND_RATE: invalid number "fast"`},
		{"file value", nil, []string{"--config", badFile}, `config file ` + badFile + `: heartbeat: invalid duration "5x"`},
		{"file range", nil, []string{"--config", bigFile}, `config file ` + bigFile + `: node-id: invalid integer "99999999999999999999": value out of range`},
		{"file unknown flag", nil, []string{"--config", unknownFile}, `config file ` + unknownFile + `: unknown flag "hartbeat"`},
		{"file missing", map[string]string{"INBOXD_CONFIG": "/nonexistent/inboxd.conf"}, nil, `config file /nonexistent/inboxd.conf: open /nonexistent/inboxd.conf`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			_, _, err := parse(t, RoleAllInOne, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A secret a flag rejects is never shown, wherever it came from: the
// checked Value of every secret flag redacts it (string flags accept any
// value, so the test uses a Value that rejects everything).
func TestValueErrorRedactsSecrets(t *testing.T) {
	for _, name := range []string{"token-secret", "nats-password", "database-url"} {
		for _, source := range []string{"env", "command line", "config file"} {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.Var(rejectAll{}, name, "")
			fs.String("config", "", "")
			var args []string
			names := name // what the error must name besides the source
			switch source {
			case "env":
				t.Setenv(EnvVars(name)[0], "postgres://u:hunter2@db/x")
				names = EnvVars(name)[0]
			case "command line":
				args = []string{"--" + name, "hunter2"}
			case "config file":
				args = []string{"--config", writeFile(t, name+" hunter2\n")}
			}
			err := Parse(fs, args)
			t.Setenv(EnvVars(name)[0], "")
			if err == nil {
				t.Fatalf("--%s from %s: no error", name, source)
			}
			if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), source) || !strings.Contains(err.Error(), names) {
				t.Errorf("--%s from %s: %v", name, source, err)
			}
		}
	}
}

type rejectAll struct{}

func (rejectAll) String() string   { return "" }
func (rejectAll) Set(string) error { return errors.New("rejected") }

func TestRedact(t *testing.T) {
	for _, tc := range []struct{ flag, value, want string }{
		{"token-secret", "s3cr3t", "<redacted>"},
		{"nats-password", "pw", "<redacted>"},
		{"database-url", "postgres://inboxd:pw@db:5432/inboxd?sslmode=disable", "postgres://inboxd:xxxxx@db:5432/inboxd?sslmode=disable"},
		{"database-url", "postgres://db:5432/inboxd?password=pw", "postgres://db:5432/inboxd?password=xxxxx"},
		{"database-url", "host=db password=pw", "<redacted>"},
		{"nats", "nats://a:pw@h1:4222,nats://a:pw@h2:4222", "nats://a:xxxxx@h1:4222,nats://a:xxxxx@h2:4222"},
		{"http", "127.0.0.1:7072", "127.0.0.1:7072"},
		{"token-secret", "", ""},
	} {
		if got := Redact(tc.flag, tc.value); got != tc.want {
			t.Errorf("Redact(%s, %q) = %q, want %q", tc.flag, tc.value, got, tc.want)
		}
	}
}

// --help shows the registered defaults, never a value from the environment
// or the config file, no secret default, and every flag's variables.
func TestHelpShowsStaticDefaults(t *testing.T) {
	env := map[string]string{
		"INBOXD_HTTP":         "127.0.0.1:9999",
		"INBOXD_HEARTBEAT":    "77s",
		"INBOXD_TOKEN_SECRET": "env-secret-5150",
		"NATS_PASSWORD":       "env-nats-pw-5150",
		"DATABASE_URL":        "postgres://u:env-db-pw-5150@db/x",
		"INBOXD_CONFIG":       writeFile(t, "tail-scan 4242\n"),
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	for _, roles := range []Role{RoleAllInOne, RoleGateway, RoleFanout} {
		_, fs, err := parse(t, roles, "-h")
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("-h: %v, want flag.ErrHelp", err)
		}
		var out bytes.Buffer
		fs.SetOutput(&out)
		fs.Usage()
		help := out.String()
		for _, v := range []string{"9999", "77s", "5150", "4242", auth.DevSecret, "inboxd:inboxd@"} {
			if strings.Contains(help, v) {
				t.Errorf("roles %d: help shows %q:\n%s", roles, v, help)
			}
		}
		def := DefaultsFor(roles)
		for _, want := range []string{"(default " + def.HTTPAddr + ")", "inboxd:xxxxx@"} {
			if !strings.Contains(help, want) {
				t.Errorf("roles %d: help lacks %q:\n%s", roles, want, help)
			}
		}
		fs.VisitAll(func(f *flag.Flag) {
			for _, e := range EnvVars(f.Name) {
				if !strings.Contains(help, e) {
					t.Errorf("roles %d: help does not name %s of --%s", roles, e, f.Name)
				}
			}
		})
	}
}

// Every flag of every binary is set by each of its environment variables.
func TestEveryFlagHasItsEnvVar(t *testing.T) {
	for _, bin := range Binaries() {
		b, roles := bin.Name, bin.Roles
		_, fs, _ := parse(t, roles)
		n := 0
		fs.VisitAll(func(f *flag.Flag) {
			n++
			for _, e := range EnvVars(f.Name) {
				v := sample(t, roles, f.Name)
				t.Setenv(e, v)
				_, got, err := parse(t, roles)
				t.Setenv(e, "")
				if err != nil {
					t.Errorf("%s: %s=%s: %v", b, e, v, err)
					continue
				}
				if s := got.Lookup(f.Name).Value.String(); s == f.DefValue {
					t.Errorf("%s: %s=%s leaves --%s at its default %q", b, e, v, f.Name, s)
				}
			}
		})
		if n < 5 {
			t.Errorf("%s: only %d flags registered", b, n)
		}
	}
}

// sample is a value flag name of roles accepts that differs from its
// default: the first of a few candidates that fits its kind (a config file
// for --config).
func sample(t *testing.T, roles Role, name string) string {
	t.Helper()
	if name == "config" {
		return writeFile(t, "")
	}
	for _, v := range []string{"7s", "7", "true", "false"} {
		c := DefaultsFor(roles)
		fs := flag.NewFlagSet("sample", flag.ContinueOnError)
		c.Register(fs, roles)
		f := fs.Lookup(name)
		if f.Value.Set(v) == nil && f.Value.String() != f.DefValue {
			return v
		}
	}
	t.Fatalf("--%s: no sample value fits; extend sample", name)
	return ""
}

// Parse leaves nothing on the FlagSet's output: the caller prints.
func TestParsePrintsNothing(t *testing.T) {
	c := DefaultsFor(RoleGateway)
	fs := flag.NewFlagSet("test", flag.ContinueOnError)
	var out bytes.Buffer
	fs.SetOutput(&out)
	c.Register(fs, RoleGateway)
	for _, args := range [][]string{{"-h"}, {"--nope"}, {"--heartbeat", "x"}} {
		_ = Parse(fs, args)
		if out.Len() != 0 {
			t.Errorf("Parse(%q) printed %q", args, out.String())
		}
	}
}

// A boolean flag (--dev, say) works bare on the command line and in the
// file, and from its variable; a malformed one is an error.
func TestParseBoolFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want bool
		err  string
	}{
		{args: []string{"--dev"}, want: true},
		{args: []string{"--config", writeFile(t, "dev\n")}, want: true},
		{env: "true", want: true},
		{env: "yes", err: `env INBOXD_DEV: invalid boolean "yes"`},
	} {
		t.Setenv("INBOXD_DEV", tc.env)
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		dev := fs.Bool("dev", false, "")
		fs.String("config", "", "")
		err := Parse(fs, tc.args)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q env %q: err %v, want %q", tc.args, tc.env, err, tc.err)
		case tc.err == "" && (err != nil || *dev != tc.want):
			t.Errorf("%q env %q: dev %v, err %v", tc.args, tc.env, *dev, err)
		}
	}
}
