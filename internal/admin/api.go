// Package admin is inboxd's admin API: a NATS micro service (discoverable
// with `nats micro ls`) to create conversations and change their members,
// to revoke users and devices, and the typed client inboxctl uses.
package admin

import "github.com/inboxd/inboxd/internal/store"

// Service identity and subjects. Requests and responses are JSON.
const (
	ServiceName = "inboxd-admin"
	Version     = "1.0.0"

	SubjectConvCreate = "inboxd.admin.conv.create"
	SubjectConvAdd    = "inboxd.admin.conv.add"
	SubjectConvRemove = "inboxd.admin.conv.remove"
	SubjectConvShow   = "inboxd.admin.conv.show"
	SubjectConvHold   = "inboxd.admin.conv.hold"
	SubjectMsgTrace   = "inboxd.admin.msg.trace"
	SubjectAudit      = "inboxd.admin.audit"
	SubjectUserRevoke = "inboxd.admin.user.revoke"

	// SubjectConvChanged (core NATS) announces a membership change; its
	// payload is the decimal conv_id. Caches listen to it; correctness does
	// not depend on it (the fanout checks member_ver under a row lock).
	SubjectConvChanged = "inboxd.event.conv.changed"
)

// CreateConvRequest asks for a direct conversation (exactly two members; the
// same pair always gets the same conversation) or, with Group, a group.
type CreateConvRequest struct {
	Members      []int64 `json:"members"`
	Group        bool    `json:"group,omitempty"`
	ShareHistory bool    `json:"share_history,omitempty"`
}

// CreateConvResponse names the conversation; Created is false when a direct
// conversation of the pair existed already.
type CreateConvResponse struct {
	ConvID  int64 `json:"conv_id"`
	Created bool  `json:"created"`
}

// MembersRequest adds or removes members of a group.
type MembersRequest struct {
	ConvID  int64   `json:"conv_id"`
	Members []int64 `json:"members"`
}

// MembersResponse gives the conversation's new member version.
type MembersResponse struct {
	ConvID    int64 `json:"conv_id"`
	MemberVer int64 `json:"member_ver"`
}

// ShowConvRequest names a conversation.
type ShowConvRequest struct {
	ConvID int64 `json:"conv_id"`
}

// ShowConvResponse is the conversation with all member rows.
type ShowConvResponse = store.Conversation

// HoldRequest puts a conversation under legal hold (Hold true: retention
// keeps its messages however old) or lifts the hold.
type HoldRequest struct {
	ConvID int64 `json:"conv_id"`
	Hold   bool  `json:"hold"`
}

// HoldResponse is the conversation's hold state after the request.
type HoldResponse = store.Hold

// Error codes of the service (micro's Nats-Service-Error-Code header).
const (
	CodeBadRequest = "400"
	CodeNotFound   = "404"
	CodeInternal   = "500"
)

// TraceRequest names a message.
type TraceRequest struct {
	MsgID int64 `json:"msg_id"`
}

// TraceResponse is the message's derived status per recipient and device.
type TraceResponse = store.TraceMessage

// AuditRequest asks for stuck messages older than OlderThanMs.
type AuditRequest struct {
	OlderThanMs int64 `json:"older_than_ms"`
	Limit       int   `json:"limit,omitempty"` // default 1000
}

// AuditResponse lists them.
type AuditResponse struct {
	Stuck []store.Stuck `json:"stuck"`
}

// RevokeRequest revokes a user's device, or with Device empty every device
// of the user: their tokens issued until now are refused (at hello and in
// a refresh), and their open connections close with REVOKED on every
// gateway. A token issued after the revocation works (iat has a precision
// of a second: from the next second on).
type RevokeRequest struct {
	UID    int64  `json:"uid"`
	Device string `json:"device,omitempty"`
}

// RevokeResponse says what was recorded, once it is durable and announced
// to the gateways.
type RevokeResponse struct {
	UID         int64  `json:"uid"`
	Device      string `json:"device"` // "": every device
	RevokedAtMs int64  `json:"revoked_at_ms"`
}
