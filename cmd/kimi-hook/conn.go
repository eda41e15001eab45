package main

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// errTimeout marks a socket deadline passing.
var errTimeout = errors.New("timeout")

// rawConn is a blocking TCP socket driven with plain syscalls. kimi-hook makes
// one request and exits: going around the runtime's network poller saves the
// poller's setup and extra threads, a measurable part of a hook's cost.
type rawConn struct{ fd int }

// dial connects to host:port with the socket's send and receive timeouts set
// to what is left until deadline. The host is an IP literal or localhost: the
// adapter listens on loopback, and leaving the resolver (package net) out of
// kimi-hook keeps its start-up cheap.
func dial(hostport string, deadline time.Time) (*rawConn, error) {
	if strings.HasPrefix(hostport, "localhost:") {
		hostport = "127.0.0.1:" + strings.TrimPrefix(hostport, "localhost:")
	}
	addr, err := netip.ParseAddrPort(hostport)
	if err != nil {
		return nil, fmt.Errorf("daemon address %q: want IP:port or localhost:port: %w", hostport, err)
	}
	family, sa := syscall.AF_INET, syscall.Sockaddr(nil)
	if addr.Addr().Is4() {
		sa = &syscall.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}
	} else {
		family = syscall.AF_INET6
		sa = &syscall.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	left := time.Until(deadline)
	if left <= 0 {
		syscall.Close(fd)
		return nil, errTimeout
	}
	tv := syscall.NsecToTimeval(left.Nanoseconds())
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv) //nolint:errcheck // best effort
	syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv) //nolint:errcheck // best effort
	for {
		err = syscall.Connect(fd, sa)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		if err == syscall.EINPROGRESS || err == syscall.EAGAIN {
			return nil, errTimeout
		}
		return nil, fmt.Errorf("connect: %w", err)
	}
	return &rawConn{fd: fd}, nil
}

func (c *rawConn) Read(p []byte) (int, error) {
	for {
		n, err := syscall.Read(c.fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return 0, errTimeout
		case err != nil:
			return 0, err
		case n == 0 && len(p) > 0:
			return 0, errEOF
		}
		return n, nil
	}
}

func (c *rawConn) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		n, err := syscall.Write(c.fd, p[written:])
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return written, errTimeout
		case err != nil:
			return written, err
		}
		written += n
	}
	return written, nil
}

func (c *rawConn) Close() error { return syscall.Close(c.fd) }
