// Package jetstream holds the JetStream stream and consumer definitions of
// inboxd as JSON files in the format `nats stream add --config FILE` and
// `nats consumer add STREAM --config FILE` accept. The services embed these
// same files and create or update their streams from them at start, so the
// files an admin reads are the definitions that run.
//
// Partitioned definitions (INBOX.json, SEND_fanout.json) are written for
// partition 0; the services derive partition p by replacing the partition
// token in the name and subject (see internal/streams). `inboxctl streams
// export` writes the concrete file of every partition.
package jetstream

import "embed"

// FS holds streams/*.json and consumers/*.json.
//
//go:embed streams/*.json consumers/*.json
var FS embed.FS
