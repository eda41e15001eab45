//go:build unix

package main

import "syscall"

// leaveGroup moves a fire-and-forget hook out of the process group Kimi
// signals when a turn ends (SIGTERM, SIGKILL 100 ms later): a PostToolUse
// hook still on its way to the spool then (a loaded machine, a spool lock
// held by another hook) died with its payload unwritten, and the tool's
// result was never seen. Kimi runs each hook as `sh -c COMMAND` in a group
// the shell leads; a shell that forks the command (dash, Debian's sh) lets
// the hook leave, and in a group of its own it finishes its delivery. Kimi
// waits for no fire-and-forget hook, so it waits no longer. Where the shell
// execs the command (bash as sh), the hook leads the group and stays:
// setpgid fails or changes nothing, and the write-ahead is the defence.
func leaveGroup() { syscall.Setpgid(0, 0) } //nolint:errcheck // staying is the old behaviour
