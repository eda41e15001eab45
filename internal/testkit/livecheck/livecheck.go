// Package livecheck runs the upstream AEP live checker (conformance/live.js
// in a checkout of the spec repository, never copied into this one) against
// a running relay, for tests. It is opt-in and local: without AEP_NODE and
// AEP_SPEC the tests that use it skip, and CI never sets them.
package livecheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment variables that enable the checker.
const (
	EnvNode = "AEP_NODE" // a Node >= 22 binary
	EnvSpec = "AEP_SPEC" // a checkout of the AEP spec repository
)

// minNode is the oldest Node live.js runs on (it needs the global WebSocket).
const minNode = 22

// runTimeout bounds one run of the checker; a run takes seconds, the control
// checks each observe a whole ack window.
const runTimeout = 3 * time.Minute

// Reasons the checker states when it skips a check, for skip tables.
const (
	// SkipAuthenticated: control-auth-gate probes only an unauthenticated run.
	SkipAuthenticated = "skipped: authenticated run"
	// SkipUnauthenticated: control-behalf-refusal probes only an authenticated run.
	SkipUnauthenticated = "skipped: unauthenticated run"
	// SkipNoTarget: the control-target checks without --control-session.
	SkipNoTarget = "no --control-session target"
	// SkipNoCancel: control-cancel without --control-cancel (it is destructive).
	SkipNoCancel = "skipped: destructive — pass --control-cancel"
)

// Skips maps a check's name to the reason (a substring of the checker's
// detail) it is expected to skip for. Any other skip fails the test.
type Skips map[string]string

// Checker is a located live.js and the Node that runs it.
type Checker struct {
	Node, Script string
}

// Require returns the checker or stops the test: it skips under -short and
// when AEP_NODE or AEP_SPEC is unset, and fails when they name no usable
// Node or no live.js.
func Require(t testing.TB) Checker {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: runs the upstream live checker; skipped under -short")
	}
	node, spec := os.Getenv(EnvNode), os.Getenv(EnvSpec)
	if node == "" || spec == "" {
		t.Skipf("set %s to a Node >= %d binary and %s to the AEP spec checkout to run conformance/live.js", EnvNode, minNode, EnvSpec)
	}
	script := filepath.Join(spec, "conformance", "live.js")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("%s=%s has no conformance/live.js: %v", EnvSpec, spec, err)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("%s=%s: %v", EnvNode, node, err)
	}
	m := regexp.MustCompile(`^v(\d+)\.`).FindSubmatch(bytes.TrimSpace(out))
	if m == nil {
		t.Fatalf("%s=%s reports version %q", EnvNode, node, out)
	}
	if major, _ := strconv.Atoi(string(m[1])); major < minNode {
		t.Fatalf("%s=%s is Node %s; live.js needs >= %d", EnvNode, node, bytes.TrimSpace(out), minNode)
	}
	return Checker{Node: node, Script: script}
}

// Check is one check's verdict in the checker's JSON report.
type Check struct {
	Name, Status, Detail string
}

// Report is the part of the checker's JSON report the tests read.
type Report struct {
	Checks []Check `json:"checks"`
	OK     bool    `json:"ok"`
}

// Counts returns how many checks passed, failed and skipped.
func (r Report) Counts() map[string]int {
	n := map[string]int{}
	for _, c := range r.Checks {
		n[c.Status]++
	}
	return n
}

// Summary is the counts and each check's status, for a test log.
func (r Report) Summary() string {
	n := r.Counts()
	parts := make([]string, len(r.Checks))
	for i, c := range r.Checks {
		parts[i] = c.Name + "=" + c.Status
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	counts := make([]string, len(keys))
	for i, k := range keys {
		counts[i] = fmt.Sprintf("%s %d", k, n[k])
	}
	return fmt.Sprintf("%d checks (%s): %s", len(r.Checks), strings.Join(counts, ", "), strings.Join(parts, " "))
}

// Run runs live.js against base with args and fails the test on any failed
// check, on any skip not in skips (or skipped for another reason), and on a
// failing verdict. The checker's human output goes to the test log.
func (c Checker) Run(t testing.TB, base string, skips Skips, args ...string) Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.Node, append([]string{c.Script, base, "--json", "-"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	t.Logf("live.js %s:\n%s", strings.Join(redact(args), " "), stderr.String())
	var report Report
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("live.js gave no JSON report (%v, exit %v): %s", err, runErr, stdout.String())
	}
	for _, p := range report.Problems(skips) {
		t.Error(p)
	}
	if runErr != nil {
		t.Errorf("live.js exited: %v", runErr)
	}
	t.Logf("live.js: %s", report.Summary())
	return report
}

// Problems lists what fails a run: every check neither passed nor skipped
// for the reason skips gives it, and a failing verdict.
func (r Report) Problems(skips Skips) []string {
	var out []string
	for _, ch := range r.Checks {
		switch ch.Status {
		case "pass":
		case "skip":
			if reason, ok := skips[ch.Name]; !ok || !strings.Contains(ch.Detail, reason) {
				out = append(out, fmt.Sprintf("unexpected skip %s: %s", ch.Name, ch.Detail))
			}
		default:
			out = append(out, fmt.Sprintf("%s %s: %s", strings.ToUpper(ch.Status), ch.Name, ch.Detail))
		}
	}
	if !r.OK {
		out = append(out, "live.js verdict: not ok")
	}
	return out
}

// redact hides the token's value in a logged argument list.
func redact(args []string) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == "--token" {
			out[i+1] = "***"
		}
	}
	return out
}
