//go:build !linux && !darwin

package adapter

import "time"

// watchProcess uses the slow poll where the platform has no exit
// notification; it returns errNoWatcher where processes cannot be read at
// all, and the session falls back to silence.
func watchProcess(p procRef, poll time.Duration, exited func()) (stop func(), err error) {
	return pollWatch(p, poll, exited)
}
