package main

import "syscall"

// childAttr ends a role process with the orchestrator, so an interrupted
// run leaves no server, publisher or subscriber behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
