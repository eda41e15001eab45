//go:build unix

package main

import (
	"os"
	"syscall"
)

// minorFaults is the minor page faults of the shell and the hook: a fresh
// page costs a short-lived process more CPU than most of its code.
func minorFaults(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Minflt
	}
	return 0
}
