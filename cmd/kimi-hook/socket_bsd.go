//go:build unix && !linux

package main

import "syscall"

// socket opens a blocking TCP socket marked close-on-exec. macOS has no
// SOCK_CLOEXEC; the fork lock keeps a concurrent exec from inheriting the
// descriptor between the two calls.
func socket(family int) (int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM, 0)
	if err != nil {
		return -1, err
	}
	syscall.CloseOnExec(fd)
	return fd, nil
}
