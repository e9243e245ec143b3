package admin

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Client calls the admin API.
type Client struct {
	NC *nats.Conn
}

// Error is an error answer of the service.
type Error struct {
	Code        string
	Description string
}

func (e *Error) Error() string { return fmt.Sprintf("admin %s: %s", e.Code, e.Description) }

func (c *Client) call(ctx context.Context, subject string, req, resp any) error {
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	msg, err := c.NC.RequestWithContext(ctx, subject, b)
	if err != nil {
		return fmt.Errorf("admin %s: %w", subject, err)
	}
	if code := msg.Header.Get(micro.ErrorCodeHeader); code != "" {
		return &Error{Code: code, Description: msg.Header.Get(micro.ErrorHeader)}
	}
	return json.Unmarshal(msg.Data, resp)
}

// CreateConv creates a conversation.
func (c *Client) CreateConv(ctx context.Context, r CreateConvRequest) (CreateConvResponse, error) {
	var out CreateConvResponse
	return out, c.call(ctx, SubjectConvCreate, r, &out)
}

// AddMembers adds members to a group.
func (c *Client) AddMembers(ctx context.Context, r MembersRequest) (MembersResponse, error) {
	var out MembersResponse
	return out, c.call(ctx, SubjectConvAdd, r, &out)
}

// RemoveMembers removes members from a group.
func (c *Client) RemoveMembers(ctx context.Context, r MembersRequest) (MembersResponse, error) {
	var out MembersResponse
	return out, c.call(ctx, SubjectConvRemove, r, &out)
}

// ShowConv returns a conversation with its members.
func (c *Client) ShowConv(ctx context.Context, convID int64) (*ShowConvResponse, error) {
	var out ShowConvResponse
	return &out, c.call(ctx, SubjectConvShow, ShowConvRequest{ConvID: convID}, &out)
}

// Hold sets or lifts a conversation's legal hold.
func (c *Client) Hold(ctx context.Context, r HoldRequest) (HoldResponse, error) {
	var out HoldResponse
	return out, c.call(ctx, SubjectConvHold, r, &out)
}

// Trace returns a message's derived status.
func (c *Client) Trace(ctx context.Context, msgID int64) (*TraceResponse, error) {
	var out TraceResponse
	return &out, c.call(ctx, SubjectMsgTrace, TraceRequest{MsgID: msgID}, &out)
}

// Audit lists stuck messages.
func (c *Client) Audit(ctx context.Context, r AuditRequest) (AuditResponse, error) {
	var out AuditResponse
	return out, c.call(ctx, SubjectAudit, r, &out)
}

// Revoke revokes a user's device, or every device of the user.
func (c *Client) Revoke(ctx context.Context, r RevokeRequest) (RevokeResponse, error) {
	var out RevokeResponse
	return out, c.call(ctx, SubjectUserRevoke, r, &out)
}
