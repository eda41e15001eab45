package main

import (
	"flag"
	"io"
	"strings"
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

// TestEnvironmentListed: the variables aep-setup's commands read are the
// ones envtable.Table says aep-setup reads, no more, no fewer.
func TestEnvironmentListed(t *testing.T) {
	named := map[string]bool{}
	for _, c := range commands(env{getenv: func(string) string { return "" }}, io.Discard, io.Discard) {
		for _, v := range c.Env {
			named[strings.Fields(v)[0]] = true
		}
	}
	reftest.CheckAlso(t, programName, named)
}
