package wire

import (
	"errors"
	"fmt"

	"github.com/inboxd/inboxd/wire/pb"
)

// Error is a protocol error with a stable code. The server sends it to the
// client as an Error frame; the client package returns it to the application.
type Error struct {
	Code         pb.ErrorCode
	Message      string
	RetryAfterMs uint32
	Fatal        bool
}

// Errorf returns an *Error with code and a formatted message.
func Errorf(code pb.ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Proto returns the Error frame body of e.
func (e *Error) Proto() *pb.Error {
	return &pb.Error{Code: e.Code, Message: e.Message, RetryAfterMs: e.RetryAfterMs, Fatal: e.Fatal}
}

// FromProto returns the *Error an Error frame carries.
func FromProto(p *pb.Error) *Error {
	return &Error{Code: p.GetCode(), Message: p.GetMessage(), RetryAfterMs: p.GetRetryAfterMs(), Fatal: p.GetFatal()}
}

// CodeOf returns the code of err if it is (or wraps) an *Error, else INTERNAL.
func CodeOf(err error) pb.ErrorCode {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return pb.ErrorCode_INTERNAL
}
