//go:build unix

package main

import (
	"errors"
	"syscall"
)

// errNotRegular is a token path that holds a directory, a pipe or a device.
var errNotRegular = errors.New("not a regular file")

// readPrivate reads a small file under the home with plain syscalls, as
// safefile.ReadFile would: a link in its place is refused (O_NOFOLLOW) and so
// is anything but a regular file, checked on the open descriptor. Going
// through os.File instead sets up the runtime's network poller (epoll, an
// eventfd, a descriptor registered and unregistered), a dozen syscalls
// kimi-hook pays on every hook for one read. O_NONBLOCK keeps a pipe planted
// there from blocking the open; it changes nothing for a regular file.
func readPrivate(path string) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, errNotRegular
	}
	buf := make([]byte, 0, max(st.Size+1, 64))
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, err
		case n == 0:
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}
