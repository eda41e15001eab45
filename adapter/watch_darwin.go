package adapter

import (
	"errors"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// kqueueWake bounds how long a stopped kqueue watcher lingers.
const kqueueWake = time.Second

// watchProcess calls exited once when p exits. On macOS it registers
// EVFILT_PROC/NOTE_EXIT on a kqueue, then checks p's start time, so a reused
// pid is never taken for p. It returns errGone when p is not running.
func watchProcess(p procRef, _ time.Duration, exited func()) (stop func(), err error) {
	kq, err := unix.Kqueue()
	if err != nil {
		return nil, err
	}
	var ev unix.Kevent_t
	unix.SetKevent(&ev, p.pid, unix.EVFILT_PROC, unix.EV_ADD|unix.EV_ONESHOT)
	ev.Fflags = unix.NOTE_EXIT
	if _, err := unix.Kevent(kq, []unix.Kevent_t{ev}, nil, nil); err != nil {
		unix.Close(kq)
		if errors.Is(err, unix.ESRCH) {
			return nil, errGone
		}
		return nil, err
	}
	if err := checkAlive(p); err != nil {
		unix.Close(kq)
		return nil, err
	}
	var stopped atomic.Bool
	go func() {
		defer unix.Close(kq)
		out := make([]unix.Kevent_t, 1)
		wake := unix.NsecToTimespec(int64(kqueueWake))
		for !stopped.Load() {
			n, err := unix.Kevent(kq, nil, out, &wake)
			if err != nil && !errors.Is(err, unix.EINTR) {
				return
			}
			if n > 0 && !stopped.Load() {
				exited()
				return
			}
		}
	}()
	return func() { stopped.Store(true) }, nil
}
