//go:build !linux

package client

import "syscall"

func bindNoPort(string, string, syscall.RawConn) error { return nil }
