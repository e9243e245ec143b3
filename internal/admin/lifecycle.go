package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/micro"

	"github.com/inboxd/inboxd/internal/lifecycle"
	"github.com/inboxd/inboxd/internal/store"
)

// The admin API of the data lifecycle: deleting a user's data
// and what is on disk.
const (
	// SubjectUserDelete asks for a user's data to be deleted and answers
	// the job's state. Idempotent: asking again answers the same job (a
	// done one at once), so a caller polls with it until state is "done".
	SubjectUserDelete = "inboxd.admin.user.delete"
	// SubjectUserDeletion answers the state of a user's deletion without
	// asking for one (404 when none was).
	SubjectUserDeletion = "inboxd.admin.user.deletion"
	// SubjectUsage answers, per stream and per table, entries, bytes and
	// the oldest entry.
	SubjectUsage = "inboxd.admin.usage"
)

// DeleteUserRequest names the user whose data is to be deleted: its inbox
// (stream and archive), device cursors and consumers, memberships and
// read state, and the bodies it sent unless their conversation is under
// legal hold. With Again, a deletion that is done runs once more (for
// data the user got after it, e.g. when it was added to a conversation
// again).
type DeleteUserRequest struct {
	UID   int64 `json:"uid"`
	Again bool  `json:"again,omitempty"`
}

// DeletionRequest names a user.
type DeletionRequest struct {
	UID int64 `json:"uid"`
}

// DeletionResponse is the deletion job: state (pending, running, done),
// the next step, what the steps removed so far, runs (more than 1: it was
// resumed after a restart), the last error of a step (it is retried).
type DeletionResponse = store.UserDeletion

// UsageResponse is every stream and every table.
type UsageResponse = lifecycle.Usage

// errNoDeletion answers a state request for a user no deletion was asked
// for (404).
var errNoDeletion = errors.New("no deletion was asked for this user")

// ServeLifecycle adds the lifecycle endpoints, served by lc, to the
// running service.
func (s *Service) ServeLifecycle(lc *lifecycle.Lifecycle) error {
	for _, e := range []struct {
		name, subject string
		h             func(context.Context, micro.Request) (any, error)
	}{
		{"user_delete", SubjectUserDelete, func(ctx context.Context, req micro.Request) (any, error) {
			var r DeleteUserRequest
			if err := decode(req, &r); err != nil {
				return nil, err
			}
			return lc.RequestDeletion(ctx, r.UID, r.Again)
		}},
		{"user_deletion", SubjectUserDeletion, func(ctx context.Context, req micro.Request) (any, error) {
			var r DeletionRequest
			if err := decode(req, &r); err != nil {
				return nil, err
			}
			d, found, err := lc.Deletion(ctx, r.UID)
			if err == nil && !found {
				err = fmt.Errorf("%w: uid %d", errNoDeletion, r.UID)
			}
			return d, err
		}},
		{"usage", SubjectUsage, func(ctx context.Context, _ micro.Request) (any, error) {
			return lc.Usage(ctx)
		}},
	} {
		if err := s.svc.AddEndpoint(e.name, s.handler(e.h), micro.WithEndpointSubject(e.subject)); err != nil {
			return fmt.Errorf("admin: endpoint %s: %w", e.subject, err)
		}
	}
	return nil
}

// DeleteUser asks for a user's data to be deleted and returns the job.
func (c *Client) DeleteUser(ctx context.Context, r DeleteUserRequest) (DeletionResponse, error) {
	var out DeletionResponse
	return out, c.call(ctx, SubjectUserDelete, r, &out)
}

// Deletion returns the state of a user's deletion.
func (c *Client) Deletion(ctx context.Context, uid int64) (DeletionResponse, error) {
	var out DeletionResponse
	return out, c.call(ctx, SubjectUserDeletion, DeletionRequest{UID: uid}, &out)
}

// Usage returns what every stream and table holds.
func (c *Client) Usage(ctx context.Context) (UsageResponse, error) {
	var out UsageResponse
	return out, c.call(ctx, SubjectUsage, struct{}{}, &out)
}
