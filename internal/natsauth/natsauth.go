// Package natsauth holds the NATS users of inboxd and their least-privilege
// subject permissions: one user per service role, plus an admin user for
// operators (the nats CLI, inboxctl). The embedded server is configured from
// this table, and deploy/nats/inboxd.conf is rendered from it
// (`inboxctl nats-conf`), so the two never drift.
package natsauth

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// Role is a NATS user of inboxd.
type Role string

// Roles.
const (
	Gateway Role = "gateway"
	Fanout  Role = "fanout"
	Syncer  Role = "syncer"
	Admin   Role = "admin"
	// AllInOne is the single connection of the all-in-one process: the union
	// of the three service roles.
	AllInOne Role = "inboxd"
)

// Roles lists every user of a split deployment.
var Roles = []Role{Gateway, Fanout, Syncer, Admin}

// JetStream API subjects every service needs to create or update the
// streams from jetstream/ at start.
var streamAPI = []string{"$JS.API.INFO", "$JS.API.STREAM.INFO.*", "$JS.API.STREAM.CREATE.*", "$JS.API.STREAM.UPDATE.*"}

// consumerAPI returns the JetStream API and ack subjects for using
// consumers of the given streams. NATS wildcards are whole tokens, so the
// INBOX partitions are listed one by one.
func consumerAPI(streams []string, verbs ...string) []string {
	var out []string
	for _, st := range streams {
		for _, v := range verbs {
			out = append(out, "$JS.API.CONSUMER."+v+"."+st+".>")
		}
		out = append(out, "$JS.ACK."+st+".>")
	}
	return out
}

// directGet returns the subjects for reading single messages of the given
// streams (the gateway asks for the newest entry of one inbox).
func directGet(streams []string) []string {
	out := make([]string, len(streams))
	for i, st := range streams {
		out[i] = "$JS.API.DIRECT.GET." + st + ".>"
	}
	return out
}

func inboxStreams(partitions int) []string {
	out := make([]string, partitions)
	for p := range out {
		out[p] = "INBOX_" + strconv.Itoa(p)
	}
	return out
}

type perms struct {
	pub, sub  []string
	responses bool // may reply to requests (services)
}

func table(partitions int) map[Role]perms {
	inbox := inboxStreams(partitions)
	return map[Role]perms{
		Gateway: {
			pub: concat(streamAPI, consumerAPI(inbox, "CREATE", "DURABLE.CREATE", "INFO", "MSG.NEXT", "RESET"),
				[]string{"send.*.*", "inbox.*.*", "inboxd.u.*.*.*"}, directGet(inbox)),
			sub: []string{"_INBOX.>", "_INBOXD.gw.>", "inboxd.u.*.*.*"},
		},
		Fanout: {
			pub: concat(streamAPI, consumerAPI([]string{"SEND"}, "CREATE", "DURABLE.CREATE", "INFO", "MSG.NEXT", "RESET", "UNPIN"),
				[]string{"inbox.*.*", "inboxd.u.*.*.live", "_INBOXD.gw.>"}),
			sub: []string{"_INBOX.>"},
		},
		Syncer: {
			pub:       concat(streamAPI, consumerAPI(inbox, "CREATE", "DURABLE.CREATE", "INFO", "MSG.NEXT", "RESET"), []string{"inboxd.event.>"}),
			sub:       []string{"_INBOX.>", "inboxd.admin.>", "$SRV.>"},
			responses: true,
		},
		Admin: {pub: []string{">"}, sub: []string{">"}},
	}
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func permsOf(r Role, partitions int) perms {
	t := table(partitions)
	if r == AllInOne {
		var p perms
		for _, x := range []Role{Gateway, Fanout, Syncer} {
			p.pub = concat(p.pub, t[x].pub)
			p.sub = concat(p.sub, t[x].sub)
			p.responses = p.responses || t[x].responses
		}
		return p
	}
	return t[r]
}

// Permissions returns the server permissions of a role for an installation
// with the given INBOX partition count.
func Permissions(r Role, partitions int) *server.Permissions {
	p := permsOf(r, partitions)
	sp := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: p.pub},
		Subscribe: &server.SubjectPermission{Allow: p.sub},
	}
	if p.responses {
		sp.Response = &server.ResponsePermission{MaxMsgs: 1}
	}
	return sp
}

// Users returns the server users for the given passwords.
func Users(passwords map[Role]string, partitions int) []*server.User {
	var out []*server.User
	for _, r := range append(slices.Clone(Roles), AllInOne) {
		pw, ok := passwords[r]
		if !ok {
			continue
		}
		out = append(out, &server.User{Username: string(r), Password: pw, Permissions: Permissions(r, partitions)})
	}
	return out
}

// Password returns the password of a role: INBOXD_NATS_PASSWORD_<ROLE>
// from the environment, else the development default (printed as a
// warning by the services; set the variables in production).
func Password(r Role) string {
	if v := os.Getenv("INBOXD_NATS_PASSWORD_" + strings.ToUpper(string(r))); v != "" {
		return v
	}
	return DevPassword(r)
}

// DevPassword is the development password of a role.
func DevPassword(r Role) string { return "inboxd-" + string(r) + "-dev" }

// Random returns a fresh password (the all-in-one process's own user).
func Random() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Conf renders the authorization block of a nats-server configuration with
// one user per role; passwords come from environment variables of the
// server ($INBOXD_NATS_PASSWORD_GATEWAY, …).
func Conf(partitions int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Generated by `inboxctl nats-conf --inbox-partitions %d` from internal/natsauth: do not edit by hand.\n", partitions)
	b.WriteString("# Passwords come from the server's environment.\n")
	b.WriteString("authorization {\n  users = [\n")
	for _, r := range Roles {
		p := permsOf(r, partitions)
		fmt.Fprintf(&b, "    {\n      user: %q\n      password: $INBOXD_NATS_PASSWORD_%s\n      permissions: {\n", string(r), strings.ToUpper(string(r)))
		fmt.Fprintf(&b, "        publish: { allow: %s }\n", list(p.pub))
		fmt.Fprintf(&b, "        subscribe: { allow: %s }\n", list(p.sub))
		if p.responses {
			b.WriteString("        allow_responses: { max: 1 }\n")
		}
		b.WriteString("      }\n    }\n")
	}
	b.WriteString("  ]\n}\n")
	return b.String()
}

func list(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
