package push

import (
	"strconv"
	"unicode/utf8"
)

// Event is a push event: the JSON body of a message on push.<uid> in the
// PUSH stream, and what the push bridge POSTs to the relay as is
// (docs/protocol.md, "Push events"). 64-bit ids are JSON strings, as in
// the protocol's JSON form, so that JavaScript relays read them exactly.
type Event struct {
	// ID is "<uid>:<n>": the Nats-Msg-Id of the event and the idempotency
	// key a relay dedupes by (the bridge delivers at least once).
	ID string `json:"id"`
	// N numbers the user's events, rising: a relay that gets an older
	// event after a newer one (a retried delivery) may drop it.
	N   int64 `json:"n"`
	UID int64 `json:"uid,string"`
	// CollapseKey is per user (apns-collapse-id, FCM collapse_key): a
	// newer event replaces an older one on the device.
	CollapseKey string `json:"collapse_key"`
	// The newest message the event covers.
	ConvID    int64 `json:"conv_id,string"`
	SenderUID int64 `json:"sender_uid,string"`
	MsgID     int64 `json:"msg_id,string"`
	ConvSeq   int64 `json:"conv_seq,string"`
	SentAtMs  int64 `json:"sent_at_ms"`
	// Messages is how many messages the event covers (those folded into
	// it during the user's collapse window and the newest), Conversations
	// in how many conversations.
	Messages      int `json:"messages"`
	Conversations int `json:"conversations"`
	// Unread is the user's unread count over every conversation, as the
	// summary computes it (last_seq − read position), when the event was
	// decided; ConvUnread that of ConvID.
	Unread     int64 `json:"unread"`
	ConvUnread int64 `json:"conv_unread"`
	// Body is the newest message's text, at most MaxBody bytes, only with
	// --push-body (off by default: the relay and the vendor see no text).
	Body          string `json:"body,omitempty"`
	BodyTruncated bool   `json:"body_truncated,omitempty"`
	// CreatedAtMs is when the syncer decided the event.
	CreatedAtMs int64 `json:"created_at_ms"`
}

// MaxBody is the longest body an event carries, in bytes (APNs allows 4 KB
// of payload in all).
const MaxBody = 1024

// EventID is the id of uid's n-th event.
func EventID(uid, n int64) string {
	return strconv.FormatInt(uid, 10) + ":" + strconv.FormatInt(n, 10)
}

// CollapseKey is uid's collapse key.
func CollapseKey(uid int64) string { return "inboxd:" + strconv.FormatInt(uid, 10) }

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}
