//go:build unix

package emitter

import "syscall"

// fileLimit is the process's soft limit on open files, or 0 when unknown.
func fileLimit() uint64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0
	}
	return uint64(r.Cur)
}
