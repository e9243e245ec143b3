package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/inboxd/inboxd/wire"
)

// conn is one transport connection: WebSocket or raw TCP.
type conn interface {
	// writeFrame writes one frame; it does not modify or keep frame.
	writeFrame(frame []byte, deadline time.Time) error
	readFrame() ([]byte, error)
	setReadDeadline(t time.Time)
	close()
}

// dial connects to rawURL: ws://host:port/path, wss://…, tcp://host:port or
// tls://host:port (TCP frames over TLS).
func dial(ctx context.Context, rawURL string, maxFrame int, local net.Addr, tlsConf *tls.Config) (conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("client: bad url %q: %w", rawURL, err)
	}
	nd := &net.Dialer{LocalAddr: local, KeepAlive: -1}
	if local != nil {
		nd.Control = bindNoPort
	}
	switch u.Scheme {
	case "tcp", "tls":
		var nc net.Conn
		if u.Scheme == "tls" {
			conf := tlsConf.Clone()
			if conf == nil {
				conf = &tls.Config{}
			}
			if conf.ServerName == "" {
				conf.ServerName = u.Hostname()
			}
			nc, err = (&tls.Dialer{NetDialer: nd, Config: conf}).DialContext(ctx, "tcp", u.Host)
		} else {
			nc, err = nd.DialContext(ctx, "tcp", u.Host)
		}
		if err != nil {
			return nil, err
		}
		return &tcpConn{nc: nc, r: bufio.NewReaderSize(nc, 16<<10), max: maxFrame}, nil
	case "ws", "wss":
		d := ws.Dialer{NetDial: nd.DialContext, TLSConfig: tlsConf}
		nc, br, _, err := d.Dial(ctx, rawURL)
		if err != nil {
			return nil, err
		}
		var r io.Reader = nc
		if br != nil {
			r = br
		}
		c := &wsConn{nc: nc}
		c.rw = struct {
			io.Reader
			io.Writer
		}{r, lockedWriter{c}}
		return c, nil
	}
	return nil, fmt.Errorf("client: url scheme %q: want ws, wss, tcp or tls", u.Scheme)
}

type tcpConn struct {
	nc  net.Conn
	r   *bufio.Reader
	buf []byte
	max int
	wmu sync.Mutex
	out []byte
}

func (c *tcpConn) writeFrame(frame []byte, deadline time.Time) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	out, at := wire.AppendLengthPrefix(c.out[:0])
	out = append(out, frame...)
	wire.PutLengthPrefix(out, at)
	c.out = out
	_ = c.nc.SetWriteDeadline(deadline)
	_, err := c.nc.Write(out)
	return err
}

func (c *tcpConn) readFrame() ([]byte, error) {
	f, err := wire.ReadTCPFrame(c.r, c.buf, c.max)
	if f != nil {
		c.buf = f[:0]
	}
	return f, err
}

func (c *tcpConn) setReadDeadline(t time.Time) { _ = c.nc.SetReadDeadline(t) }
func (c *tcpConn) close()                      { _ = c.nc.Close() }

type wsConn struct {
	nc  net.Conn
	rw  io.ReadWriter
	wmu sync.Mutex
	out []byte // masking happens in place: frames are copied here first
}

// lockedWriter serialises the control frames wsutil writes (pongs) with ours.
type lockedWriter struct{ c *wsConn }

func (w lockedWriter) Write(p []byte) (int, error) {
	w.c.wmu.Lock()
	defer w.c.wmu.Unlock()
	return w.c.nc.Write(p)
}

func (c *wsConn) writeFrame(frame []byte, deadline time.Time) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.nc.SetWriteDeadline(deadline)
	c.out = append(c.out[:0], frame...)
	return wsutil.WriteClientBinary(c.nc, c.out)
}

func (c *wsConn) readFrame() ([]byte, error) {
	for {
		b, op, err := wsutil.ReadServerData(c.rw)
		if err != nil {
			return nil, err
		}
		if op == ws.OpBinary {
			return b, nil
		}
	}
}

func (c *wsConn) setReadDeadline(t time.Time) { _ = c.nc.SetReadDeadline(t) }
func (c *wsConn) close()                      { _ = c.nc.Close() }
