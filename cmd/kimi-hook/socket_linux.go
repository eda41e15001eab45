package main

import "syscall"

// socket opens a blocking TCP socket, close-on-exec from the start.
func socket(family int) (int, error) {
	return syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
}
