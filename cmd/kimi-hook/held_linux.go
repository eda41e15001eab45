package main

import (
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// quickLeave: a held hook catches SIGTERM only once its reply is late
// (awaitHeld).
const quickLeave = true

// leaveOnTerm gives SIGTERM its default action back (the process ends),
// from the ignoring main set. os/signal offers no way there that does not
// start the runtime's signal thread; a zero sigaction is SIG_DFL with no
// flags on every Linux architecture. A later signal.Notify installs the
// runtime's handler over it as usual.
func leaveOnTerm() {
	var sa [4]uint64
	syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(syscall.SIGTERM), uintptr(unsafe.Pointer(&sa)), 0, 8, 0, 0) //nolint:errcheck // then SIGTERM stays ignored until caught, as before
}

// readable reports whether the reply starts (or the connection ends)
// within d.
func (c *rawConn) readable(d time.Duration) bool {
	fds := []unix.PollFd{{Fd: int32(c.fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(d.Milliseconds()))
		if err == unix.EINTR {
			continue
		}
		return n > 0 || err != nil
	}
}
