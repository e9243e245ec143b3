package config

//go:generate go run ./gen -out ../../docs/configuration.md

import (
	"flag"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Binary is a command and the roles it registers flags for.
type Binary struct {
	Name  string
	Roles Role
}

// Binaries are the commands built on this configuration, in the order the
// reference names them. (inboxd --nats-only registers RoleEmbeddedNATS
// alone: a subset of inboxd's flags.)
func Binaries() []Binary {
	return []Binary{
		{"inboxd", RoleAllInOne},
		{"gateway", RoleGateway},
		{"fanout", RoleFanout},
		{"syncer", RoleSyncer},
		{"pushbridge", RolePushBridge},
	}
}

// ReferenceMarks names the generated part of docs/configuration.md.
const ReferenceMarks = "flags"

// Reference is the table of docs/configuration.md: every flag of every
// binary (Binaries), by name, with the kind of value it takes, its
// default as --help shows it (a secret's left out), the environment
// variables that set it (EnvVars), the binaries that take it and its
// help. It is rendered from Register and DefaultsFor, so it cannot
// disagree with them; `go generate ./internal/config` writes it.
func Reference() string {
	type entry struct {
		kind, help string
		defaults   map[string][]string // shown default → binaries
		binaries   []string
	}
	flags := map[string]*entry{}
	for _, b := range Binaries() {
		c := DefaultsFor(b.Roles)
		fs := flag.NewFlagSet(b.Name, flag.ContinueOnError)
		c.Register(fs, b.Roles)
		fs.VisitAll(func(f *flag.Flag) {
			e := flags[f.Name]
			if e == nil {
				kind := kind(f.Value)
				if kind == "boolean" {
					kind = "bool"
				}
				e = &entry{kind: kind, help: f.Usage, defaults: map[string][]string{}}
				flags[f.Name] = e
			}
			def := shownDefault(f.Name, f.DefValue)
			e.defaults[def] = append(e.defaults[def], b.Name)
			e.binaries = append(e.binaries, b.Name)
		})
	}
	names := make([]string, 0, len(flags))
	for n := range flags {
		names = append(names, n)
	}
	sort.Strings(names)

	all := len(Binaries())
	var out strings.Builder
	out.WriteString("| flag | value | default | environment | binaries | what it sets |\n")
	out.WriteString("|---|---|---|---|---|---|\n")
	for _, n := range names {
		e := flags[n]
		var defs []string
		for d, bins := range e.defaults {
			if len(e.defaults) > 1 {
				d += " (" + strings.Join(bins, ", ") + ")"
			}
			defs = append(defs, d)
		}
		sort.Slice(defs, func(i, j int) bool { return firstBinary(defs[i]) < firstBinary(defs[j]) })
		var env []string
		for _, v := range EnvVars(n) {
			env = append(env, "`"+v+"`")
		}
		bins := strings.Join(e.binaries, ", ")
		if len(e.binaries) == all {
			bins = "all"
		}
		fmt.Fprintf(&out, "| `--%s` | %s | %s | %s | %s | %s |\n",
			n, e.kind, strings.Join(defs, "; "), strings.Join(env, " or "), bins, markdownText(helpWithoutEnv(e.help)))
	}
	return out.String()
}

// firstBinary orders a flag's defaults by the first binary that has each,
// in Binaries' order.
func firstBinary(def string) int {
	for i, b := range Binaries() {
		if strings.Contains(def, "("+b.Name) {
			return i
		}
	}
	return 0
}

// shownDefault is a default as the reference shows it: as --help shows it
// (Usage: a URL without its password), "unset" for an empty one and "not
// shown" for a secret.
func shownDefault(name, def string) string {
	switch shown := Redact(name, def); {
	case def == "":
		return "unset"
	case shown == "<redacted>":
		return "not shown"
	default:
		return "`" + shortDuration(shown) + "`"
	}
}

// shortDuration drops a duration's zero minutes and seconds as people
// write it (1h0m0s: 1h, 5m0s: 5m); anything else is returned as it is.
func shortDuration(s string) string {
	if _, err := time.ParseDuration(s); err != nil || s == "0s" {
		return s
	}
	if t, ok := strings.CutSuffix(s, "m0s"); ok {
		s = t + "m"
	}
	if t, ok := strings.CutSuffix(s, "h0m"); ok {
		s = t + "h"
	}
	return s
}

// envInHelp matches the environment variables a help names, which the
// reference has a column for: "(env X)", "(env X or Y; …)", "(…; env X)".
var envInHelp = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(` ?\(env [A-Z_]+(?: or [A-Z_]+)*\)`), ""},
	{regexp.MustCompile(`\(env [A-Z_]+(?: or [A-Z_]+)*; `), "("},
	{regexp.MustCompile(`; env [A-Z_]+(?: or [A-Z_]+)*\)`), ")"},
}

func helpWithoutEnv(help string) string {
	for _, r := range envInHelp {
		help = r.re.ReplaceAllString(help, r.with)
	}
	return help
}

// markdownText is s for a Markdown table cell: < and > outside code spans
// as entities (INBOX_<p> is no HTML tag), | escaped.
func markdownText(s string) string {
	var b strings.Builder
	code := false
	for _, r := range s {
		switch {
		case r == '`':
			code = !code
			b.WriteRune(r)
		case r == '|':
			b.WriteString(`\|`)
		case r == '<' && !code:
			b.WriteString("&lt;")
		case r == '>' && !code:
			b.WriteString("&gt;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
