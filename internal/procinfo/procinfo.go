// Package procinfo reads the few facts about a local process that tie a hook
// to the Kimi process it serves: its parent, its command name and its start
// time. kimi-hook links it for every hook, so it stays light (no package net,
// no crypto) and reads one small kernel record per process.
package procinfo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// Info is what Read reports about one process.
type Info struct {
	// PPID is the parent's process id.
	PPID int
	// Comm is the command name as the kernel records it (possibly cut
	// short, e.g. 15 bytes on Linux).
	Comm string
	// Start is the process's start time as an opaque token: two readings
	// are equal only for the same process, so a reused pid with a different
	// start is a different process.
	Start string
	// StartNs is the start time in nanoseconds on the clock clockNs reads
	// (Linux: since boot; macOS: Unix time), comparable only on this
	// machine.
	StartNs int64
	// Exited is set for a process that has exited and waits to be reaped
	// (a zombie): its record remains, the process does not.
	Exited bool
}

// ErrUnsupported is returned where the platform offers no reader.
var ErrUnsupported = errors.New("procinfo: not supported on this platform")

// IsShell reports whether comm names a shell a hook command can run under
// (Kimi runs each hook as `sh -c COMMAND`).
func IsShell(comm string) bool {
	switch strings.TrimPrefix(filepath.Base(comm), "-") {
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox", "fish", "tcsh", "csh", "yash", "posh":
		return true
	}
	return false
}

// IsWrapper reports whether comm names a command that runs another as its
// child and waits for it, as a hook command may (`timeout 20 kimi-hook`).
// Its own start says nothing: on a loaded machine it can fork the hook
// well past LaunchWindow after it started itself.
func IsWrapper(comm string) bool {
	switch filepath.Base(comm) {
	case "timeout", "time", "flock", "strace", "ltrace":
		return true
	}
	return false
}

// Limits of the ancestor walk in Served.
const (
	// MaxAncestors bounds how far up Served looks.
	MaxAncestors = 8
	// LaunchWindow: an ancestor started less than this before the hook
	// process is part of the hook's own launch (its shell, a wrapper), not
	// Kimi, which runs for far longer than this before its first hook.
	LaunchWindow = 100_000_000 // ns
)

// Served names the Kimi process the calling hook process serves: the
// nearest ancestor that is neither a shell (Kimi runs each hook as
// `sh -c COMMAND`), nor a known wrapper (IsWrapper), nor started within
// LaunchWindow before the hook process itself. The window counts from the hook's own start, not from now: on a
// loaded machine the hook may take longer than the window to reach this
// call, and a wrapper it was launched through (`timeout`, a shim) must not
// pass for Kimi then. ok is false when no such ancestor is found or the
// platform has no reader. It reads one kernel record for itself and one per
// ancestor looked at, usually one or two.
func Served() (pid int, info Info, ok bool) {
	self, err := Read(os.Getpid())
	if err != nil {
		return 0, Info{}, false
	}
	pid = self.PPID
	for i := 0; i < MaxAncestors && pid > 1; i++ {
		p, err := Read(pid)
		if err != nil {
			return 0, Info{}, false
		}
		if !IsShell(p.Comm) && !IsWrapper(p.Comm) && self.StartNs-p.StartNs >= LaunchWindow {
			return pid, p, true
		}
		pid = p.PPID
	}
	return 0, Info{}, false
}
