package adapter

import (
	"errors"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/procinfo"
)

// procRef names one process: its pid and its start time (an opaque token),
// so a reused pid is never taken for the process that had it before.
type procRef struct {
	pid   int
	start string
}

func (p procRef) valid() bool { return p.pid > 0 && p.start != "" }

// errGone says the named process is not running: it exited, or its pid now
// belongs to a process that started at another time.
var errGone = errors.New("process gone")

// errNoWatcher says this platform cannot watch the process.
var errNoWatcher = errors.New("no process watcher on this platform")

// checkAlive reports errGone unless p is running with its recorded start.
func checkAlive(p procRef) error {
	info, err := procinfo.Read(p.pid)
	switch {
	case errors.Is(err, procinfo.ErrUnsupported):
		return errNoWatcher
	case err != nil, info.Exited:
		return errGone // no such process, or only its unreaped record
	case info.Start != p.start:
		return errGone // the pid was reused
	}
	return nil
}

// pollWatch is the slow watcher: it checks p every interval and calls exited
// once p is gone. stop ends it without a call.
func pollWatch(p procRef, interval time.Duration, exited func()) (stop func(), err error) {
	if err := checkAlive(p); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if checkAlive(p) != nil {
					exited()
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }, nil
}
