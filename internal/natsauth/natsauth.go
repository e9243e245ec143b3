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

// InboxPrefix is the reply-subject prefix of a role's connections
// (nats.CustomInboxPrefix). Each role may subscribe only below its own, so
// one service cannot read another's replies: JetStream API answers, pull
// deliveries and publish acks all travel on reply subjects.
func InboxPrefix(r Role) string { return "_INBOX." + string(r) }

// Stream and consumer names the permissions name literally (the streams
// package holds their definitions; natsauth_test checks they agree).
const (
	sendStream = "SEND"
	archiver   = "archiver" // the syncer's consumer on every INBOX partition
)

func inboxStreams(partitions int) []string {
	out := make([]string, partitions)
	for p := range out {
		out[p] = "INBOX_" + strconv.Itoa(p)
	}
	return out
}

// streamInfo lets a role look streams up: every service waits at start
// until the streams exist (the syncer creates them) and reads their state.
const streamInfo = "$JS.API.STREAM.INFO.*"

// consumerCalls returns the JetStream API subjects of the given consumer
// calls on stream st for consumers named name ("*": any). Consumer names
// are one token, NATS wildcards are whole tokens: a grant is per stream
// and either per consumer or for all of the stream's consumers.
func consumerCalls(st, name string, verbs ...string) []string {
	out := make([]string, len(verbs))
	for i, v := range verbs {
		out[i] = "$JS.API.CONSUMER." + v + "." + st + "." + name
	}
	return out
}

type perms struct {
	pub, sub  []string
	denyPub   []string // carved out of pub (a role's grants only; the all-in-one user has none)
	responses bool     // may reply to requests (services)
}

// table lists, per role, the subjects its code uses (and nothing more):
//
//   - gateway: publishes sends (send.<p>.<conv>) and receipt entries
//     (inbox.<p>.<uid>) with JetStream acks, the users' live and kick
//     subjects; creates, reads, pulls, resets, acks and deletes (one whose
//     server is down, to recreate it) the device consumers
//     on INBOX_<p> (filtered to one user's subject, never the archiver);
//     direct-gets a user's newest entry; receives send results on
//     _INBOXD.gw.<gateway>.*, the users' subjects, membership changes and
//     erased bodies (a deleted user's, dropped from its body cache).
//   - fanout: its consumers fanout_<p> on SEND (create, read, pull, reset,
//     unpin, ack); publishes inbox entries, the live announcements and the
//     send results.
//   - syncer: the installation's steward: creates and updates the streams;
//     the archiver consumer on each INBOX_<p>; trims the INBOX streams
//     (purges of archived entries older than the hot window, direct gets
//     of entry times); reads device consumers (the admin API's cursors);
//     serves the admin API (a micro service) and publishes its events and
//     revocation kicks; the early cleanup: purges of one user's subject
//     below a sequence and direct gets; the data lifecycle: lists and deletes device
//     consumers of INBOX_<p>, reads a user's last entry and purges its
//     subject (a deleted user's), and asks the admin API for a deleted
//     user's revocation.
//
// Nothing but admin may delete a stream or a consumer of SEND; nothing
// but the syncer and admin may purge a stream, and the syncer only the
// INBOX streams, or delete an INBOX stream's consumer.
func table(partitions int) map[Role]perms {
	inbox := inboxStreams(partitions)
	var gw, gwDeny, sy []string
	for p, st := range inbox {
		ps := strconv.Itoa(p)
		gw = concat(gw,
			// The filter subject is part of the create subject: a device
			// consumer reads one user of the stream's own partition.
			[]string{"$JS.API.CONSUMER.CREATE." + st + ".*.inbox." + ps + ".*"},
			// DELETE: a device consumer whose NATS server is down (an R1
			// consumer on a cluster) is deleted and created again from the
			// mirror on a running server; no more power than RESET, which
			// may put a cursor anywhere already.
			consumerCalls(st, "*", "INFO", "MSG.NEXT", "RESET", "DELETE"),
			[]string{"$JS.ACK." + st + ".>", "$JS.API.DIRECT.GET." + st + ".inbox." + ps + ".*"})
		gwDeny = concat(gwDeny,
			[]string{"$JS.API.CONSUMER.CREATE." + st + "." + archiver + ".>", "$JS.ACK." + st + "." + archiver + ".>"},
			consumerCalls(st, archiver, "INFO", "MSG.NEXT", "RESET", "DELETE"))
		sy = concat(sy,
			consumerCalls(st, archiver, "CREATE", "MSG.NEXT", "RESET"),
			// Lifecycle: a user deletion and housekeeping delete device
			// consumers (found by name), read a user's last entry and
			// purge its inbox subject.
			consumerCalls(st, "*", "INFO", "DELETE"),
			[]string{"$JS.API.CONSUMER.NAMES." + st, "$JS.API.DIRECT.GET." + st + ".inbox." + ps + ".*"},
			[]string{"$JS.ACK." + st + "." + archiver + ".>",
				// The trimmer: purges of archived entries older than the
				// hot window, direct gets of an entry's time; a deletion
				// purges a user's subject.
				"$JS.API.STREAM.PURGE." + st, "$JS.API.DIRECT.GET." + st})
	}
	for _, st := range append([]string{sendStream}, inbox...) {
		sy = concat(sy, []string{"$JS.API.STREAM.CREATE." + st, "$JS.API.STREAM.UPDATE." + st})
	}
	return map[Role]perms{
		Gateway: {
			pub:     concat(gw, []string{streamInfo, "send.*.*", "inbox.*.*", "inboxd.u.*.*.*"}),
			denyPub: gwDeny,
			sub:     []string{"_INBOXD.gw.>", "inboxd.u.*.*.*", "inboxd.event.conv.changed", "inboxd.event.bodies.erased"},
		},
		Fanout: {
			pub: concat([]string{streamInfo, "$JS.API.CONSUMER.CREATE." + sendStream + ".>", "$JS.ACK." + sendStream + ".>"},
				consumerCalls(sendStream, "*", "INFO", "MSG.NEXT", "RESET", "UNPIN"),
				[]string{"inbox.*.*", "inboxd.u.*.*.live", "_INBOXD.gw.>"}),
		},
		Syncer: {
			pub:       concat(sy, []string{streamInfo, "inboxd.event.>", "inboxd.u.*.*.kick", "inboxd.admin.user.revoke"}),
			sub:       []string{"inboxd.admin.>", "$SRV.>"},
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
	var p perms
	if r == AllInOne {
		// One process holds every service role: the union of their
		// grants, without the carve-outs (the syncer's archiver is the
		// gateway's deny).
		for _, x := range []Role{Gateway, Fanout, Syncer} {
			p.pub = concat(p.pub, t[x].pub)
			p.sub = concat(p.sub, t[x].sub)
			p.responses = p.responses || t[x].responses
		}
	} else {
		p = t[r]
	}
	if r != Admin {
		p.sub = concat(p.sub, []string{InboxPrefix(r) + ".>"})
	}
	return p
}

// Permissions returns the server permissions of a role for an installation
// with the given INBOX partition count.
func Permissions(r Role, partitions int) *server.Permissions {
	p := permsOf(r, partitions)
	sp := &server.Permissions{
		Publish:   &server.SubjectPermission{Allow: p.pub, Deny: p.denyPub},
		Subscribe: &server.SubjectPermission{Allow: p.sub},
	}
	if p.responses {
		// One reply per request within the default window, as a
		// configuration file's allow_responses: { max: 1 } reads.
		sp.Response = &server.ResponsePermission{MaxMsgs: 1, Expires: server.DEFAULT_ALLOW_RESPONSE_EXPIRATION}
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
		if len(p.denyPub) > 0 {
			fmt.Fprintf(&b, "        publish: { allow: %s, deny: %s }\n", list(p.pub), list(p.denyPub))
		} else {
			fmt.Fprintf(&b, "        publish: { allow: %s }\n", list(p.pub))
		}
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
