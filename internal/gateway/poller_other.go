//go:build !linux

package gateway

import (
	"context"
	"errors"
	"net"
	"time"

	"go.uber.org/zap"
)

// poller is Linux only (epoll); elsewhere every connection keeps its
// reader goroutine.
type poller struct{}

func newPoller(*zap.Logger, time.Duration, func(int)) (*poller, error) {
	return nil, errors.New("parking idle connections needs epoll (Linux)")
}

func pollFD(net.Conn) int32               { return -1 }
func (p *poller) park(*Conn) bool         { return false }
func (p *poller) forget(*Conn)            {}
func (p *poller) run(ctx context.Context) {}
