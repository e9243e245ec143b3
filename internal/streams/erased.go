package streams

import (
	"strconv"
	"strings"
)

// BodiesErased (core NATS) announces message bodies that a user deletion
// erased: the gateways drop them from their body caches, so that no page
// serves a deleted body from memory. The payload is the msg_ids in
// decimal, separated by spaces (ErasedIDs, ParseErasedIDs).
const BodiesErased = "inboxd.event.bodies.erased"

// ErasedIDs encodes msg_ids for BodiesErased.
func ErasedIDs(ids []int64) []byte {
	b := make([]byte, 0, len(ids)*20)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	return b
}

// ParseErasedIDs decodes a BodiesErased payload; what is not a number is
// skipped.
func ParseErasedIDs(b []byte) []int64 {
	var out []int64
	for _, f := range strings.Fields(string(b)) {
		if id, err := strconv.ParseInt(f, 10, 64); err == nil {
			out = append(out, id)
		}
	}
	return out
}
