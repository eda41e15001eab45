package relay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/livecheck"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// liveSkips are the checks live.js may skip, by run, with the reason the
// checker itself states; any other skip or any failure fails the test.
var liveSkips = map[string]livecheck.Skips{
	"authenticated": {
		"control-auth-gate":        livecheck.SkipAuthenticated,
		"control-ack":              livecheck.SkipNoTarget,
		"control-nack-unsupported": livecheck.SkipNoTarget,
		"control-dedupe":           livecheck.SkipNoTarget,
		"control-cancel":           livecheck.SkipNoTarget,
	},
	"watch-only": {
		"control-behalf-refusal":   livecheck.SkipUnauthenticated,
		"control-ack":              livecheck.SkipNoTarget,
		"control-nack-unsupported": livecheck.SkipNoTarget,
		"control-dedupe":           livecheck.SkipNoTarget,
		"control-cancel":           livecheck.SkipNoTarget,
	},
	"with-target": {
		"control-auth-gate": livecheck.SkipAuthenticated,
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
	t.Parallel()
	checker := livecheck.Require(t)
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
			t.Run(run.name, func(t *testing.T) { liveRun(t, checker, open, run.name, run.token, run.target) })
		}
	})
}

// liveRun runs live.js once against a fresh relay on the store open makes.
func liveRun(t *testing.T, checker livecheck.Checker, open storeOpener, name, token string, target bool) {
	srv := relaytest.RunServer(t, relay.Config{Token: token, Buffer: 8, Backend: open(t, 8, 0, 0)})
	args := []string{"--evict", "--timeout", "5000"}
	if token != "" {
		args = append(args, "--token", token)
	}
	if target {
		session := startTarget(t, srv.URL, token)
		args = append(args, "--control-session", session, "--control-cancel", "r-live", "--ack-window", "1500")
	}
	checker.Run(t, srv.URL, liveSkips[name], args...)
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
	e := newPublisher(t, client.PublisherConfig{
		URL: base, Token: token, Agent: "kimi-target", Instance: "test/1",
		Control: &wire.Control{Accepts: []string{"control.attention.respond", "control.cancel"}, AckWindowMS: 1500},
	})
	e.Publish(next("session.started", `{"client":{"name":"relay-test-target"}}`))
	run := next("run.started", `{"trigger":"user"}`)
	run.Run = "r-live"
	e.Publish(run)
	runPublisher(t, e, func(_ context.Context, cmd *aep.Event) {
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
	})
	eventually(t, "target connected", func() bool { return e.State() == client.PublisherConnected && e.Stats().Sent >= 1 })
	return session
}
