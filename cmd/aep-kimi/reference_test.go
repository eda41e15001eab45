package main

import (
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/reftest"
)

// referenceEnv is an empty environment whose home is "~", so the defaults
// the reference shows read as a reader's own (~/.aep) and not the test's.
func referenceEnv(t *testing.T) func(string) string { return homeEnv(t, "~") }

// TestReference keeps docs/reference in step with the code: aep-kimi's
// part of commands.md from its command table (aep-setup's and kimi-hook's
// tests write theirs). -update rewrites them.
func TestReference(t *testing.T) {
	getenv := referenceEnv(t)
	t.Run("commands", func(t *testing.T) {
		got := reftest.Commands(prog, reftest.FromTable(prog, commands(getenv, stdio{})))
		reftest.Section(t, reftest.File(t, "commands.md"), reftest.CommandsHead, prog, reftest.Binaries, got, *update)
	})
	t.Run("environment", func(t *testing.T) {
		reftest.Golden(t, reftest.File(t, "environment.md"), environmentReference(t, getenv), *update)
	})
	t.Run("files", func(t *testing.T) {
		checkHomeFiles(t, startedHome(t))
		reftest.Golden(t, reftest.File(t, "files.md"), filesReference(), *update)
	})
	t.Run("metrics", func(t *testing.T) {
		reftest.Golden(t, reftest.File(t, "metrics.md"), metricsReference(t), *update)
	})
}
