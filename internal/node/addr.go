package node

import (
	"fmt"
	"net"
	"strconv"
)

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("address %q: port: %w", addr, err)
	}
	if port == 0 {
		port = -1 // a free port
	}
	return host, port, nil
}
