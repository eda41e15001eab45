package main

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// errTimeout marks a socket deadline passing.
var errTimeout = errors.New("timeout")

// daemonAddr parses the adapter's host:port. The host is an IP literal or
// localhost: the adapter listens on loopback, and leaving the resolver
// (package net) out of kimi-hook keeps its start-up cheap.
func daemonAddr(hostport string) (netip.AddrPort, error) {
	if strings.HasPrefix(hostport, "localhost:") {
		hostport = "127.0.0.1:" + strings.TrimPrefix(hostport, "localhost:")
	}
	addr, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("daemon address %q: want IP:port or localhost:port: %w", hostport, err)
	}
	return addr, nil
}
