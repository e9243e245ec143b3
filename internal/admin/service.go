package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"
	"go.uber.org/zap"

	"github.com/inboxd/inboxd/internal/ids"
	"github.com/inboxd/inboxd/internal/store"
	"github.com/inboxd/inboxd/internal/streams"
)

// Service serves the admin API.
type Service struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	l   streams.Layout
	st  *store.Store
	log *zap.Logger
	svc micro.Service
}

// Start registers the micro service on nc. Stop it with Stop.
func Start(nc *nats.Conn, js jetstream.JetStream, l streams.Layout, st *store.Store, log *zap.Logger) (*Service, error) {
	s := &Service{nc: nc, js: js, l: l, st: st, log: log}
	svc, err := micro.AddService(nc, micro.Config{
		Name:        ServiceName,
		Version:     Version,
		Description: "inboxd admin: conversations, membership, revocations and legal hold",
	})
	if err != nil {
		return nil, err
	}
	s.svc = svc
	for _, e := range []struct {
		name, subject string
		h             func(context.Context, micro.Request) (any, error)
	}{
		{"conv_create", SubjectConvCreate, s.create},
		{"conv_add", SubjectConvAdd, s.add},
		{"conv_remove", SubjectConvRemove, s.remove},
		{"conv_show", SubjectConvShow, s.show},
		{"conv_hold", SubjectConvHold, s.hold},
		{"msg_trace", SubjectMsgTrace, s.trace},
		{"audit", SubjectAudit, s.audit},
		{"user_revoke", SubjectUserRevoke, s.revoke},
	} {
		if err := svc.AddEndpoint(e.name, s.handler(e.h), micro.WithEndpointSubject(e.subject)); err != nil {
			_ = svc.Stop()
			return nil, err
		}
	}
	return s, nil
}

// Stop deregisters the service.
func (s *Service) Stop() error { return s.svc.Stop() }

func (s *Service) handler(h func(context.Context, micro.Request) (any, error)) micro.HandlerFunc {
	return func(req micro.Request) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := h(ctx, req)
		if err != nil {
			code := CodeInternal
			switch {
			case errors.Is(err, store.ErrInvalid), errors.Is(err, errBadJSON):
				code = CodeBadRequest
			case errors.Is(err, store.ErrConvNotFound), errors.Is(err, store.ErrMsgNotFound), errors.Is(err, errNoDeletion):
				code = CodeNotFound
			default:
				s.log.Error("admin request", zap.String("subject", req.Subject()), zap.Error(err))
			}
			_ = req.Error(code, err.Error(), nil)
			return
		}
		_ = req.RespondJSON(resp)
	}
}

var errBadJSON = errors.New("request is not valid JSON for this endpoint")

func decode(req micro.Request, v any) error {
	if err := json.Unmarshal(req.Data(), v); err != nil {
		return errors.Join(errBadJSON, err)
	}
	return nil
}

func (s *Service) create(ctx context.Context, req micro.Request) (any, error) {
	var r CreateConvRequest
	if err := decode(req, &r); err != nil {
		return nil, err
	}
	kind := store.KindDirect
	if r.Group {
		kind = store.KindGroup
	}
	id, created, err := s.st.CreateConversation(ctx, kind, r.Members, r.ShareHistory)
	if err != nil {
		return nil, err
	}
	return CreateConvResponse{ConvID: id, Created: created}, nil
}

func (s *Service) add(ctx context.Context, req micro.Request) (any, error) {
	return s.members(ctx, req, s.st.AddMembers)
}

func (s *Service) remove(ctx context.Context, req micro.Request) (any, error) {
	return s.members(ctx, req, s.st.RemoveMembers)
}

func (s *Service) members(ctx context.Context, req micro.Request, change func(context.Context, int64, []int64) (int64, error)) (any, error) {
	var r MembersRequest
	if err := decode(req, &r); err != nil {
		return nil, err
	}
	ver, err := change(ctx, r.ConvID, r.Members)
	if err != nil {
		return nil, err
	}
	_ = s.nc.Publish(SubjectConvChanged, []byte(strconv.FormatInt(r.ConvID, 10)))
	return MembersResponse{ConvID: r.ConvID, MemberVer: ver}, nil
}

func (s *Service) show(ctx context.Context, req micro.Request) (any, error) {
	var r ShowConvRequest
	if err := decode(req, &r); err != nil {
		return nil, err
	}
	return s.st.GetConversation(ctx, r.ConvID)
}

// hold sets or lifts a conversation's legal hold. It waits while
// retention drops a range (store.SetHold).
func (s *Service) hold(ctx context.Context, req micro.Request) (any, error) {
	var r HoldRequest
	if err := decode(req, &r); err != nil {
		return nil, err
	}
	if r.ConvID <= 0 {
		return nil, fmt.Errorf("%w: conv_id must be positive", store.ErrInvalid)
	}
	h, err := s.st.SetHold(ctx, r.ConvID, r.Hold)
	if err != nil {
		return nil, err
	}
	s.log.Info("legal hold changed", zap.Int64("conv_id", r.ConvID), zap.Bool("hold", r.Hold))
	return h, nil
}

// trace derives a message's status per recipient and device: STORED (the
// content row exists), DELIVERED (the device's cursor passed the entry),
// READ (the recipient's read_seq reached its conv_seq). Device cursors are
// read from their consumers (the ack floor), or from the mirror when the
// consumer is gone.
func (s *Service) trace(ctx context.Context, req micro.Request) (any, error) {
	var r TraceRequest
	if err := decode(req, &r); err != nil {
		return nil, err
	}
	t, err := s.st.Trace(ctx, r.MsgID)
	if err != nil {
		return nil, err
	}
	for i := range t.Recipients {
		rc := &t.Recipients[i]
		rc.Status = "STORED"
		if rc.ReadSeq >= t.ConvSeq {
			rc.Status = "READ"
		}
		stream := streams.InboxStream(ids.Partition(rc.UID, s.l.InboxPartitions))
		for j := range rc.Devices {
			d := &rc.Devices[j]
			if c, err := s.js.Consumer(ctx, stream, d.Consumer); err == nil {
				d.Cursor = max(d.Cursor, c.CachedInfo().AckFloor.Stream)
			}
			switch {
			case rc.Status == "READ":
				d.Status = "READ"
			case rc.Seq > 0 && d.Cursor >= rc.Seq:
				d.Status = "DELIVERED"
			default:
				d.Status = "STORED"
			}
		}
	}
	return t, nil
}

func (s *Service) audit(ctx context.Context, req micro.Request) (any, error) {
	var r AuditRequest
	if err := decode(req, &r); err != nil {
		return nil, err
	}
	if r.Limit <= 0 || r.Limit > 10000 {
		r.Limit = 1000
	}
	stuck, err := s.st.Audit(ctx, time.Duration(r.OlderThanMs)*time.Millisecond, r.Limit)
	if err != nil {
		return nil, err
	}
	return AuditResponse{Stuck: stuck}, nil
}

// revoke records the revocation in Postgres, then announces it on the
// user's kick subject, where every gateway holding a connection of the
// user listens. The announcement leaves on this connection before the
// answer does, so an answer means the NATS server has it. A gateway that
// misses it (cut from NATS) finds the revocation in its sweep.
func (s *Service) revoke(ctx context.Context, req micro.Request) (any, error) {
	var r RevokeRequest
	if err := decode(req, &r); err != nil {
		return nil, err
	}
	at, err := s.st.Revoke(ctx, r.UID, r.Device)
	if err != nil {
		return nil, err
	}
	p := ids.Partition(r.UID, s.l.InboxPartitions)
	if err := s.nc.Publish(streams.UserKick(p, r.UID), streams.RevokeAnnouncement(r.Device, at)); err != nil {
		return nil, fmt.Errorf("revocation of %d/%q recorded, announcing it failed (the gateways' sweep applies it): %w", r.UID, r.Device, err)
	}
	s.log.Info("revoked", zap.Int64("uid", r.UID), zap.String("device", r.Device), zap.Time("revoked_at", at))
	return RevokeResponse{UID: r.UID, Device: r.Device, RevokedAtMs: at.UnixMilli()}, nil
}
