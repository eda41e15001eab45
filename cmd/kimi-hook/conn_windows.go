package main

import (
	"errors"
	"io"
	"net"
	"os"
	"time"
)

// rawConn is a TCP connection through package net: Windows sockets are not
// file descriptors, and the start-up cost that keeps package net out of
// kimi-hook on Unix is not measured there.
type rawConn struct{ c net.Conn }

// dial connects to host:port before deadline; reads and writes share it.
func dial(hostport string, deadline time.Time) (*rawConn, error) {
	addr, err := daemonAddr(hostport)
	if err != nil {
		return nil, err
	}
	if !time.Now().Before(deadline) {
		return nil, errTimeout
	}
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("tcp", addr.String())
	if err != nil {
		return nil, netErr(err)
	}
	if err := c.SetDeadline(deadline); err != nil {
		c.Close()
		return nil, err
	}
	return &rawConn{c: c}, nil
}

func netErr(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errTimeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return errTimeout
	}
	if errors.Is(err, io.EOF) {
		return errEOF
	}
	return err
}

func (c *rawConn) Read(p []byte) (int, error) {
	n, err := c.c.Read(p)
	if err != nil {
		err = netErr(err)
	}
	return n, err
}

func (c *rawConn) Write(p []byte) (int, error) {
	n, err := c.c.Write(p)
	if err != nil {
		err = netErr(err)
	}
	return n, err
}

func (c *rawConn) Close() error { return c.c.Close() }
