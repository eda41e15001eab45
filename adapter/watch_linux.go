package adapter

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// watchProcess calls exited once when p exits. On Linux it holds a pidfd
// (pidfd_open, 5.3+), which refers to one process for good: once it is open
// and p's start time still matches, a reused pid cannot be mistaken for p.
// The pidfd waits in the runtime's poller (readable on exit), so a watched
// session costs no thread. Without pidfd it falls back to the slow poll.
// It returns errGone when p is not running, errNoWatcher when it cannot be
// watched at all.
func watchProcess(p procRef, poll time.Duration, exited func()) (stop func(), err error) {
	fd, err := unix.PidfdOpen(p.pid, 0)
	switch {
	case errors.Is(err, unix.ESRCH):
		return nil, errGone
	case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
		return pollWatch(p, poll, exited)
	case err != nil:
		return nil, err
	}
	// Checked after the pidfd is open: the pidfd's process is the one
	// whose start time is read now.
	if err := checkAlive(p); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	go func() {
		err := rc.Read(func(fd uintptr) bool {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			n, err := unix.Poll(fds, 0)
			return err == nil && n > 0
		})
		if err == nil { // not stopped: the process exited
			exited()
		}
	}()
	return func() { f.Close() }, nil
}
