// Package release holds no code: its tests check what the release
// scripts and configuration beside them build (archives, the image).
package release

import (
	"os"
	"os/exec"
	"testing"
)

// requireTool finds a program an end-to-end test of the release needs:
// the test skips without it, but fails under CI, whose .ci/run installs it.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not installed (.ci/run installs it): %v", name, err)
		}
		t.Skipf("no %s on the PATH", name)
	}
	return p
}
