package streams

// Headers inboxd puts on stream messages.
const (
	// HeaderReply (SEND) is the subject the fanout publishes the SendResult to.
	HeaderReply = "Inboxd-Reply"
	// HeaderConv (INBOX) is the conversation of an inbox entry.
	HeaderConv = "Inboxd-Conv"
	// HeaderKind (INBOX) is what an inbox entry is: "msg" for a message.
	HeaderKind = "Inboxd-Kind"
)

// KindMessage is the HeaderKind of a message entry.
const KindMessage = "msg"
