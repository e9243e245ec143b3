// Package ids holds the identities of inboxd: the snowflake-style msg_id
// generator and the partition function that places users in INBOX_<p> and
// conversations in SEND partitions.
package ids

import "strconv"

// Partition returns the partition of id among n partitions: fnv32a of the
// decimal id mod n. This is the hash nats-server's subject mapping function
// partition(n, wildcard) uses, so a server-side mapping of "inbox.<uid>" and
// this function agree on where a user lives.
func Partition(id int64, n int) int {
	if n <= 1 {
		return 0
	}
	var buf [20]byte
	b := strconv.AppendInt(buf[:0], id, 10)
	const (
		offset32 = 2166136261
		prime32  = 16777619
	)
	h := uint32(offset32)
	for _, c := range b {
		h ^= uint32(c)
		h *= prime32
	}
	return int(h % uint32(n))
}
