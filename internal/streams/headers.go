package streams

import "github.com/nats-io/nats.go/jetstream"

// Headers inboxd puts on stream messages.
const (
	// HeaderReply (SEND) is the subject the fanout publishes the SendResult to.
	HeaderReply = "Inboxd-Reply"
	// HeaderSendKey (SEND) is "<uid>:<client_msg_id>" on a send published
	// without a Nats-Msg-Id (a clustered SEND refused its id as in
	// process); otherwise the Nats-Msg-Id says it.
	HeaderSendKey = "Inboxd-Send-Key"
	// HeaderConv (INBOX) is the conversation of an inbox entry.
	HeaderConv = "Inboxd-Conv"
	// HeaderKind (INBOX) is what an inbox entry is: "msg" for a message.
	HeaderKind = "Inboxd-Kind"
)

// KindMessage is the HeaderKind of a message entry.
const KindMessage = "msg"

// ErrCodeMsgIDInProcess is JetStream's "duplicate message id is in
// process" (409, err_code 10158): a clustered stream's leader refuses a
// Nats-Msg-Id whose proposal it lost (every node's power cut) for the whole
// duplicate window. The fanout publishes such entries again under salted
// ids, the gateway such a send without an id.
const ErrCodeMsgIDInProcess jetstream.ErrorCode = 10158
