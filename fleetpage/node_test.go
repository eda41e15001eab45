package fleetpage_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
)

// TestStateConformance runs the page's state module through the consumer
// conformance obligations over the golden corpus, and through the fold's
// golden cases it shares with relay/consumer, and the service worker
// through its push and click handling, with Node's test runner (the
// Node the Kimi harness installs: the page itself needs no Node).
func TestStateConformance(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs Node; skipped under -short")
	}
	corpus := fixtures.Require(t)
	node := kimiharness.Node(kimiharness.Require(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The page's modules must at least parse: node checks their syntax as
	// ES modules (a .mjs copy, since the page serves them as .js), and
	// boot.js, a classic script, as one (.cjs); the service worker is a
	// classic script too, checked as one by the worker test.
	for _, f := range []string{"app.js", "boot.js", "state.js", "push.js", "socket.js", "socketworker.js", "vlist.js"} {
		b, err := os.ReadFile(filepath.Join("assets", f))
		if err != nil {
			t.Fatal(err)
		}
		ext := ".mjs"
		if f == "boot.js" {
			ext = ".cjs"
		}
		mjs := filepath.Join(t.TempDir(), strings.TrimSuffix(f, ".js")+ext)
		if err := os.WriteFile(mjs, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.CommandContext(ctx, node, "--check", mjs).CombinedOutput(); err != nil {
			t.Errorf("assets/%s does not parse: %v\n%s", f, err, out)
		}
	}
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec",
		filepath.Join("testdata", "state.test.mjs"), filepath.Join("testdata", "fold.test.mjs"), filepath.Join("testdata", "sw.test.mjs"),
		filepath.Join("testdata", "vlist.test.mjs"))
	cmd.Env = append(os.Environ(), fixtures.Env+"="+corpus, "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
