//go:build unix

package bridgeweb

import (
	"errors"
	"syscall"
)

// pidAlive is kill(pid, 0): ESRCH means gone, EPERM means alive but not ours.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
