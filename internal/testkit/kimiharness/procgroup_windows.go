package kimiharness

import (
	"os"
	"os/exec"
	"syscall"
)

// OwnGroup is a no-op: Windows has no process groups to signal.
func OwnGroup(*exec.Cmd) {}

// SignalGroup kills p: Windows delivers no SIGTERM, so every signal ends
// the process at once.
func SignalGroup(p *os.Process, _ syscall.Signal) error { return p.Kill() }
