package main

import (
	"flag"
	"io"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/reftest"
)

var update = flag.Bool("update", false, "rewrite aep-setup's part of docs/reference")

// TestReference keeps aep-setup's part of docs/reference/commands.md in
// step with its command table (-update rewrites it); the defaults are an
// empty environment's.
func TestReference(t *testing.T) {
	getenv := func(k string) string {
		if k == envHome {
			return "~"
		}
		return ""
	}
	cmds := commands(env{getenv: getenv}, io.Discard, io.Discard)
	got := reftest.Commands(programName, reftest.FromTable(programName, cmds))
	reftest.Section(t, reftest.File(t, "commands.md"), reftest.CommandsHead, programName, reftest.Binaries, got, *update)
}
