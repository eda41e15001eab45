package relay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/relaytest"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// liveSkips are the checks live.js may skip, by run, with the reason the
// checker itself states; any other skip or any failure fails the test.
var liveSkips = map[string]map[string]string{
	"authenticated": {
		"control-auth-gate":        "skipped: authenticated run",
		"control-ack":              "no --control-session target",
		"control-nack-unsupported": "no --control-session target",
		"control-dedupe":           "no --control-session target",
		"control-cancel":           "no --control-session target",
	},
	"watch-only": {
		"control-behalf-refusal":   "skipped: unauthenticated run",
		"control-ack":              "no --control-session target",
		"control-nack-unsupported": "no --control-session target",
		"control-dedupe":           "no --control-session target",
		"control-cancel":           "no --control-session target",
	},
	"with-target": {
		"control-auth-gate": "skipped: authenticated run",
	},
}

// TestLiveChecker runs the upstream live checker (conformance/live.js from
// the AEP spec checkout, never copied here) against this relay on each
// store: once authenticated with --evict, once watch-only, and once with a
// connected control-capable target so the routing checks run too. It needs AEP_NODE
// (a Node >= 22 binary) and AEP_SPEC (the spec checkout); without them it
// skips: live.js is run locally against a spec checkout, never vendored or
// run in CI.
func TestLiveChecker(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: runs the upstream live checker; skipped under -short")
	}
	node, spec := os.Getenv("AEP_NODE"), os.Getenv("AEP_SPEC")
	if node == "" || spec == "" {
		t.Skip("set AEP_NODE to a Node >= 22 binary and AEP_SPEC to the AEP spec checkout to run conformance/live.js")
	}
	script := filepath.Join(spec, "conformance", "live.js")
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("AEP_SPEC=%s has no conformance/live.js: %v", spec, err)
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		t.Fatalf("AEP_NODE=%s: %v", node, err)
	}
	if m := regexp.MustCompile(`^v(\d+)\.`).FindSubmatch(bytes.TrimSpace(out)); m == nil {
		t.Fatalf("AEP_NODE=%s reports version %q", node, out)
	} else if major, _ := strconv.Atoi(string(m[1])); major < 22 {
		t.Fatalf("AEP_NODE=%s is Node %s; live.js needs >= 22", node, out)
	}

	runs := []struct {
		name   string
		token  string
		target bool
	}{
		{"authenticated", testToken, false},
		{"watch-only", "", false},
		{"with-target", testToken, true},
	}
	eachStore(t, func(t *testing.T, open storeOpener) {
		for _, run := range runs {
			t.Run(run.name, func(t *testing.T) { liveRun(t, node, script, open, run.name, run.token, run.target) })
		}
	})
}

// liveRun runs live.js once against a fresh relay on the store open makes.
func liveRun(t *testing.T, node, script string, open storeOpener, name, token string, target bool) {
	srv := relaytest.RunServer(t, relay.Config{Token: token, Buffer: 8, Backend: open(t, 8, 0, 0)})
	args := []string{script, srv.URL, "--evict", "--json", "-", "--timeout", "5000"}
	if token != "" {
		args = append(args, "--token", token)
	}
	if target {
		session := startTarget(t, srv.URL, token)
		args = append(args, "--control-session", session, "--control-cancel", "r-live", "--ack-window", "1500")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	t.Logf("live.js %s:\n%s", name, stderr.String())
	var report struct {
		Checks []struct{ Name, Status, Detail string } `json:"checks"`
		OK     bool                                    `json:"ok"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("no JSON report (%v, exit %v): %s", err, runErr, stdout.String())
	}
	counts := map[string]int{}
	for _, c := range report.Checks {
		counts[c.Status]++
		switch c.Status {
		case "pass":
		case "skip":
			if reason, ok := liveSkips[name][c.Name]; !ok || !strings.Contains(c.Detail, reason) {
				t.Errorf("unexpected skip %s: %s", c.Name, c.Detail)
			}
		default:
			t.Errorf("%s %s: %s", strings.ToUpper(c.Status), c.Name, c.Detail)
		}
	}
	if !report.OK || runErr != nil {
		t.Errorf("live.js verdict ok=%v exit=%v", report.OK, runErr)
	}
	t.Logf("live.js %s: %d checks: %v", name, len(report.Checks), counts)
}

// startTarget connects a minimal control-capable target through the
// Emitter: it claims a session with run r-live, acks every declared command
// once, re-emits the recorded ack byte-identically on a retransmit
// (AEP-0004 §3), and answers control.cancel with a cause-linked
// run.cancelled (§5).
func startTarget(t *testing.T, base, token string) string {
	t.Helper()
	session := fmt.Sprintf("live-target-%d", time.Now().UnixNano())
	src := "aep://test/agent/kimi-target/session/" + session
	seq := int64(-1)
	next := func(typ string, data string) *aep.Event {
		seq++
		return &aep.Event{AEP: aep.Version, ID: aep.NewID(), Type: typ, Time: aep.FormatTime(time.Now()),
			Source: src, Agent: "kimi-target", Session: session, Seq: aep.Int64(seq), Epoch: aep.Int64(0),
			Data: json.RawMessage(data)}
	}
	acks := map[[2]string]*aep.Event{}
	var e *client.Emitter
	e = newEmitter(t, client.EmitterConfig{
		URL: base, Token: token, Agent: "kimi-target", Instance: "test/1",
		Control: &wire.Control{Accepts: []string{"control.attention.respond", "control.cancel"}, AckWindowMS: 1500},
		OnCommand: func(_ context.Context, cmd *aep.Event) {
			key := [2]string{cmd.Source, cmd.ID}
			if ack, ok := acks[key]; ok {
				e.Publish(ack) // same event, same bytes: a redelivery
				return
			}
			ack := next("control.accepted", `{}`)
			ack.Cause = cmd.ID
			acks[key] = ack
			e.Publish(ack)
			if cmd.Type == "control.cancel" {
				done := next("run.cancelled", `{"by":"control"}`)
				done.Run, done.Cause = cmd.Run, cmd.ID
				e.Publish(done)
			}
		},
	})
	e.Publish(next("session.started", `{"client":{"name":"relay-test-target"}}`))
	run := next("run.started", `{"trigger":"user"}`)
	run.Run = "r-live"
	e.Publish(run)
	runEmitter(t, e)
	eventually(t, "target connected", func() bool { return e.State() == client.EmitterConnected && e.Stats().Sent >= 1 })
	return session
}
