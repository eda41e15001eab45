//go:build unix

package kimiharness

import (
	"os"
	"os/exec"
	"syscall"
)

// OwnGroup makes cmd lead a process group of its own, so SignalGroup reaches
// it and everything it starts (as Kimi signals a hook's group).
func OwnGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// SignalGroup sends sig to the process group p leads.
func SignalGroup(p *os.Process, sig syscall.Signal) error { return syscall.Kill(-p.Pid, sig) }
