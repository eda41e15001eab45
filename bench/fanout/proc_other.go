//go:build !linux

package main

import "syscall"

// childAttr is the default elsewhere, where a terminal's interrupt reaches
// the role processes with the orchestrator (one process group).
func childAttr() *syscall.SysProcAttr { return nil }
