package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3"
)

// EnvPrefix starts the environment variable of every flag: --foo-bar is
// INBOXD_FOO_BAR.
const EnvPrefix = "INBOXD_"

// legacyEnv are the names some flags were set through before every flag had
// its INBOXD_ one; deployments use them, so they stay valid.
var legacyEnv = map[string]string{
	"nats":          "NATS_URL",
	"nats-user":     "NATS_USER",
	"nats-password": "NATS_PASSWORD",
	"database-url":  "DATABASE_URL",
}

// EnvVars are the environment variables that set flag name: INBOXD_<NAME>
// first, then the legacy name if it has one.
func EnvVars(name string) []string {
	vars := []string{EnvPrefix + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))}
	if l, ok := legacyEnv[name]; ok {
		vars = append(vars, l)
	}
	return vars
}

// Secret reports whether the value of flag name must never be printed: not
// in --help, not in an error, not in a log.
func Secret(name string) bool {
	return strings.Contains(name, "secret") || strings.Contains(name, "password") ||
		name == "database-url" || name == "pg"
}

// Redact is value as it may be printed for flag name: a secret flag's value
// is "<redacted>", except a URL, which keeps everything but its password
// (postgres://inboxd:xxxxx@db:5432/inboxd); a URL with a password in any
// flag is redacted too (nats://user:pass@host). Comma-separated URL lists
// (--nats) are redacted one by one.
func Redact(name, value string) string {
	parts := strings.Split(value, ",")
	for i, p := range parts {
		r, ok := redactURL(p)
		switch {
		case ok:
			parts[i] = r
		case Secret(name) && value != "":
			return "<redacted>"
		}
	}
	return strings.Join(parts, ",")
}

// redactURL is u without its password, and false when u is no URL with a
// scheme and a host (a DSN, a plain secret).
func redactURL(u string) (string, bool) {
	p, err := url.Parse(strings.TrimSpace(u))
	if err != nil || p.Scheme == "" || p.Host == "" {
		return "", false
	}
	if q := p.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		p.RawQuery = q.Encode()
	}
	return p.Redacted(), true
}

// Parse sets the flags of fs, each from the first of these that has it:
// the command line (args), the environment (EnvVars; an empty variable
// counts as unset), the file named by --config if fs has that flag ("flag
// value" lines, # comments: ff.PlainParser), the default. A malformed
// value, an unknown flag in the file, or an INBOXD_ and a legacy variable
// of one flag both set to different values is an error naming the flag and
// where the value came from, and never showing a secret (Redact). On -h it
// returns flag.ErrHelp and prints nothing: the caller prints fs.Usage.
//
// Parse sets fs.Usage to print the flags without a secret's default or any
// value from the environment, and writes nothing to fs.Output itself.
// A flag's Set must be idempotent (every stdlib kind is): ff.Parse reads
// the command line again before the file.
func Parse(fs *flag.FlagSet, args []string) error {
	fs.VisitAll(func(f *flag.Flag) {
		if _, ok := f.Value.(checked); !ok {
			f.Value = checked{Value: f.Value, name: f.Name}
		}
	})
	out := fs.Output()
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = Usage(fs, EnvVars)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("command line: %w", redactFlagError(err))
	}

	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := parseEnv(fs, set); err != nil {
		return err
	}
	if fs.Lookup("config") == nil {
		return nil
	}
	// ff.Parse reads the command line again (no change), then the file for
	// the flags neither the command line nor the environment set: fs.Visit
	// marks both, and ff skips what it marks.
	path := fs.Lookup("config").Value.String()
	err = ff.Parse(fs, args,
		ff.WithConfigFileFlag("config"),
		ff.WithConfigFileParser(fileParser(fs, path)))
	var fe *fileError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return fe
	}
	return fmt.Errorf("config file %s: %w", path, err)
}

// stdlibInvalid is how the flag package reports a value Set rejected:
// with the value as given, which for a secret flag must not be shown.
var stdlibInvalid = regexp.MustCompile(`^invalid (?:boolean )?value ".*" for (?:flag )?-([^:\s]+): `)

// redactFlagError is err from flag.Parse with a secret flag's value
// replaced by "<redacted>" (the rest of the message is checked's, redacted
// already).
func redactFlagError(err error) error {
	m := stdlibInvalid.FindStringSubmatchIndex(err.Error())
	if m == nil {
		return err
	}
	msg := err.Error()
	name := msg[m[2]:m[3]]
	if !Secret(name) {
		return err
	}
	return fmt.Errorf("invalid value <redacted> for flag -%s: %s", name, msg[m[1]:])
}

// parseEnv sets every flag not in set from its environment variables.
func parseEnv(fs *flag.FlagSet, set map[string]bool) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] {
			return
		}
		var from, value string
		for _, name := range EnvVars(f.Name) {
			v := os.Getenv(name)
			switch {
			case v == "":
			case from == "":
				from, value = name, v
			case v != value:
				err = fmt.Errorf("env %s and %s are both set, to different values: set one (--%s)", from, name, f.Name)
				return
			}
		}
		if from == "" {
			return
		}
		if e := fs.Set(f.Name, value); e != nil {
			err = fmt.Errorf("env %s: %w", from, e)
		}
	})
	return err
}

// fileError is an error in the config file, already naming the file.
type fileError struct {
	path, flag string
	err        error
}

func (e *fileError) Error() string {
	if e.flag == "" {
		return fmt.Sprintf("config file %s: %v", e.path, e.err)
	}
	return fmt.Sprintf("config file %s: %s: %v", e.path, e.flag, e.err)
}

func (e *fileError) Unwrap() error { return e.err }

// fileParser is ff.PlainParser with its errors naming the file, an unknown
// flag reported as such (ff's own message names no file), and a name's
// leading dashes dropped.
func fileParser(fs *flag.FlagSet, path string) ff.ConfigFileParser {
	return func(r io.Reader, set func(name, value string) error) error {
		return ff.PlainParser(r, func(name, value string) error {
			name = strings.TrimLeft(name, "-") // "--heartbeat 5s" as on the command line
			if fs.Lookup(name) == nil {
				return &fileError{path: path, err: fmt.Errorf("unknown flag %q", name)}
			}
			if err := set(name, value); err != nil {
				var ve *ValueError
				if errors.As(err, &ve) {
					err = ve // ff's wrapping says "from config file" again
				}
				return &fileError{path: path, flag: name, err: err}
			}
			return nil
		})
	}
}

// ValueError is a value a flag does not accept; Value is already redacted.
type ValueError struct {
	Flag, Kind, Value string
	Err               error
}

func (e *ValueError) Error() string {
	msg := fmt.Sprintf("invalid %s %s", e.Kind, e.Value)
	// The stdlib's "parse error" says nothing the kind does not.
	if e.Err != nil && e.Err.Error() != "parse error" {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *ValueError) Unwrap() error { return e.Err }

// checked wraps a flag's Value so that a rejected value is a ValueError
// that names the kind expected and shows the value only if it is no secret.
type checked struct {
	flag.Value
	name string
}

func (c checked) Set(v string) error {
	if err := c.Value.Set(v); err != nil {
		shown := Redact(c.name, v)
		if shown == v {
			shown = fmt.Sprintf("%q", v)
		}
		return &ValueError{Flag: c.name, Kind: kind(c.Value), Value: shown, Err: err}
	}
	return nil
}

// IsBoolFlag keeps --flag without a value working for booleans.
func (c checked) IsBoolFlag() bool {
	b, ok := c.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Get keeps flag.Getter.
func (c checked) Get() any {
	if g, ok := c.Value.(flag.Getter); ok {
		return g.Get()
	}
	return nil
}

// kind names what v expects, for errors and the usage.
func kind(v flag.Value) string {
	g, ok := v.(flag.Getter)
	if !ok {
		return "value"
	}
	switch g.Get().(type) {
	case bool:
		return "boolean"
	case int, int64, uint, uint64:
		return "integer"
	case float64:
		return "number"
	case time.Duration:
		return "duration"
	case string:
		return "string"
	}
	return "value"
}

// Usage returns a usage printer for fs like flag.PrintDefaults, with --
// before names, the default of a secret flag left out (its help says what
// it is) or redacted (a URL), and, when env is not nil, the environment
// variables of each flag its help does not name already. It prints
// DefValue, the registered default, never a value set since.
func Usage(fs *flag.FlagSet, env func(flag string) []string) func() {
	return func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage of %s:\n", fs.Name())
		if env != nil {
			fmt.Fprintf(w, "  (a flag beats its environment variable, which beats the --config file, which beats the default)\n")
		}
		fs.VisitAll(func(f *flag.Flag) {
			name, help := flag.UnquoteUsage(f)
			if name == "value" {
				name = kind(f.Value)
			}
			if name == "boolean" {
				name = ""
			}
			line := "  --" + f.Name
			if name != "" {
				line += " " + name
			}
			line += "\n    \t" + strings.ReplaceAll(help, "\n", "\n    \t")
			switch shown := Redact(f.Name, f.DefValue); {
			case f.DefValue == "" || f.DefValue == "0" || f.DefValue == "false" || f.DefValue == "0s":
			case shown == "<redacted>":
			default:
				line += " (default " + shown + ")"
			}
			if env != nil {
				var missing []string
				for _, e := range env(f.Name) {
					if !strings.Contains(help, e) {
						missing = append(missing, e)
					}
				}
				if len(missing) > 0 {
					line += " (env " + strings.Join(missing, " or ") + ")"
				}
			}
			fmt.Fprintln(w, line)
		})
	}
}
