package client

import "syscall"

// ipBindAddressNoPort is IP_BIND_ADDRESS_NO_PORT (Linux 4.2+): with a
// local address to dial from, the kernel picks the source port at
// connect time by the whole 4-tuple instead of at bind time, where it must
// find a port free for every destination (slow, and soon exhausted, when
// thousands of connections dial from one address).
const ipBindAddressNoPort = 24

func bindNoPort(_, _ string, rc syscall.RawConn) error {
	return rc.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, ipBindAddressNoPort, 1)
	})
}
