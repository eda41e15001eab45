//go:build !unix

package main

// leaveGroup: Windows has no process group Kimi signals.
func leaveGroup() {}
