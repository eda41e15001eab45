// Package release holds no code: its tests check what the release
// scripts beside them build: the image (release/dist tests its own).
package release

import (
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
)

// requireTool finds a program an end-to-end test of the image needs.
func requireTool(t *testing.T, name, install string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	return proctest.Require(t, name, install)
}
