//go:build unix

package main

import (
	"fmt"
	"syscall"
	"time"
)

// rawConn is a blocking TCP socket driven with plain syscalls. kimi-hook makes
// one request and exits: going around the runtime's network poller saves the
// poller's setup and extra threads, a measurable part of a hook's cost.
type rawConn struct{ fd int }

// dial connects to host:port with the socket's send and receive timeouts set
// to what is left until deadline.
func dial(hostport string, deadline time.Time) (*rawConn, error) {
	addr, err := daemonAddr(hostport)
	if err != nil {
		return nil, err
	}
	family, sa := syscall.AF_INET, syscall.Sockaddr(nil)
	if addr.Addr().Is4() {
		sa = &syscall.SockaddrInet4{Port: int(addr.Port()), Addr: addr.Addr().As4()}
	} else {
		family = syscall.AF_INET6
		sa = &syscall.SockaddrInet6{Port: int(addr.Port()), Addr: addr.Addr().As16()}
	}
	fd, err := socket(family)
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
