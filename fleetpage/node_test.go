package fleetpage_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/kimiharness"
)

// TestStateConformance runs the page's state module through the consumer
// conformance obligations over the golden corpus with Node's test runner
// (the Node the Kimi harness installs: the page itself needs no Node).
func TestStateConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Node; skipped under -short")
	}
	corpus := fixtures.Require(t)
	node := kimiharness.Node(kimiharness.Require(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", filepath.Join("testdata", "state.test.mjs"))
	cmd.Env = append(os.Environ(), fixtures.Env+"="+corpus, "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
