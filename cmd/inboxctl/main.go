// Command inboxctl is the inboxd client and admin CLI. Every command prints
// JSON lines on stdout; errors are JSON lines too, with a non-zero exit.
//
//	inboxctl conv create --members 1,2,3 [--group] [--share-history]
//	inboxctl conv add|remove --conv C --members 4,5
//	inboxctl conv show --conv C
//	inboxctl conv hold --conv C [--off]
//	inboxctl send --uid U --device D --conv C --text T [--count K] [--client-msg-id ID]
//	inboxctl sync --uid U --device D [--idle 2s] [--max N] [--no-ack] [--kind K]
//	inboxctl trace MSG_ID
//	inboxctl audit [--older-than 10m]
//	inboxctl token --uid U --device D [--ttl 24h] [--kid K] [--issuer I]
//	inboxctl user revoke --uid U [--device D]
//	inboxctl user delete --uid U [--again] [--timeout 10m] [--no-wait]
//	inboxctl usage
//	inboxctl streams export --dir DIR [--hot-window 720h]
//	inboxctl streams set [--hot-window D] [--replicas N]
//
// Connection flags (each command): --nats URL (admin API), --url URL
// (gateway: ws://127.0.0.1:7070/ws or tcp://127.0.0.1:7071), --secret
// (token secret; env INBOXD_TOKEN_SECRET; default the development secret).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: inboxctl <command> [flags]

commands:
  conv create --members 1,2,3 [--group] [--share-history]   create a conversation: {"conv_id":N}
  conv add    --conv C --members 4,5                         add members to a group
  conv remove --conv C --members 4,5                         remove members from a group
  conv show   --conv C                                       show a conversation and its members
  conv hold   --conv C [--off]                               legal hold: retention keeps its messages ({"conv_id":C,"hold":true,...}); --off lifts it
  send --uid U --device D --conv C --text T [--count K] [--client-msg-id ID]
                                                             send K messages in order; one JSON result per line
  sync --uid U --device D [--idle 2s] [--max N] [--no-ack] [--kind mobile|desktop|web]
                                                             print the device's messages, one JSON line each, and confirm them
  trace MSG_ID                                               a message's status per recipient and device (STORED, DELIVERED, READ)
  audit [--older-than 10m]                                   messages that connected devices did not confirm
  token --uid U --device D [--ttl 24h] [--kid K] [--issuer I] print a signed client token
  user revoke --uid U [--device D]                           revoke a device (default: every device of the user):
                                                             its connections close, its tokens issued until now are refused
  user delete --uid U [--again] [--timeout 10m] [--no-wait]  delete the user's inbox, cursors, memberships and sent bodies
                                                             (unless held); waits until done, then exits 0
  usage                                                      per stream and per table: entries, bytes, the oldest entry
  nats-conf                                                  print the NATS users and permissions (deploy/nats/auth.conf)
  streams export --dir DIR [--hot-window 720h]               write every stream and consumer definition as JSON
  streams set [--hot-window D] [--replicas N]                change the installation's hot window or replica count: {"hot_window":"…","replicas":N,"changed":[streams]}

run "inboxctl <command> -h" for the flags of a command.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

func run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "conv":
		if len(rest) == 0 {
			fmt.Fprint(os.Stderr, usage)
			return 2
		}
		return convCmd(ctx, rest[0], rest[1:])
	case "user":
		if len(rest) == 0 {
			fmt.Fprint(os.Stderr, usage)
			return 2
		}
		return userCmd(ctx, rest[0], rest[1:])
	case "usage":
		return usageCmd(ctx, rest)
	case "send":
		return sendCmd(ctx, rest)
	case "sync":
		return syncCmd(ctx, rest)
	case "nats-conf":
		return natsConfCmd(rest)
	case "trace":
		return traceCmd(ctx, rest)
	case "audit":
		return auditCmd(ctx, rest)
	case "token":
		return tokenCmd(rest)
	case "streams":
		switch {
		case len(rest) > 0 && rest[0] == "export":
			return streamsExportCmd(rest[1:])
		case len(rest) > 0 && rest[0] == "set":
			return streamsSetCmd(ctx, rest[1:])
		}
		fmt.Fprint(os.Stderr, usage)
		return 2
	case "-h", "--help", "help":
		fmt.Print(usage)
		return 0
	}
	fmt.Fprintf(os.Stderr, "inboxctl: unknown command %q\n\n%s", cmd, usage)
	return 2
}

// emit prints v as one JSON line.
func emit(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

// errorLine is the JSON error every command prints before a non-zero exit.
type errorLine struct {
	Error       string `json:"error"`
	Code        string `json:"code,omitempty"`
	ClientMsgID string `json:"client_msg_id,omitempty"`
	Status      string `json:"status,omitempty"`
}

func fail(err error) int {
	emit(errorLine{Error: err.Error()})
	return 1
}
