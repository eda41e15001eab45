package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Respond answers as a socket's command would: delivered to the claimant,
// held in the session's history, the person stamped; refusals say why.
func TestRespond(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	tgt := target(t, srv, "both", "kimi", "s-rsp", `{"accepts":["control.attention.respond"],"ack_window_ms":10000}`)
	ctx := context.Background()
	alice := access.Principal{Name: "alice", Role: access.RoleAnswer, Capture: aep.CaptureMetadata}
	if err := srv.Respond(ctx, alice, "aep-kimi-link", "s-rsp", "req-1", "deny"); err != nil {
		t.Fatalf("Respond: %v", err)
	}
	got := tgt.eventFrames(t, 1)[0]
	var cmd map[string]any
	if err := json.Unmarshal(got.raw, &cmd); err != nil {
		t.Fatal(err)
	}
	data, _ := cmd["data"].(map[string]any)
	ans, _ := data["answer"].(map[string]any)
	if cmd["type"] != "control.attention.respond" || cmd["agent"] != "aep-kimi-link" || cmd["subject"] != "req-1" ||
		cmd["cause"] != "req-1" || cmd[mapping.ExtBy] != "alice" || ans["option"] != "deny" || cmd["seq"] != nil {
		t.Fatalf("command: %s", got.raw)
	}
	hist := sessionReplay(t, srv, "s-rsp")
	if len(hist) != 2 || hist[1].Event != "control.attention.respond" || hist[1].Data != string(got.raw) {
		t.Fatalf("history %+v: want the claim then the command", hist)
	}

	var re *relay.RespondError
	if err := srv.Respond(ctx, alice, "aep-kimi-link", "s-none", "req-1", "deny"); !errors.As(err, &re) || re.Code != wire.CodeNoRoute {
		t.Errorf("no claimant: %v, want %s", err, wire.CodeNoRoute)
	}
	other := target(t, srv, "both", "kimi", "s-cancel-only", `{"accepts":["control.cancel"]}`)
	_ = other
	if err := srv.Respond(ctx, alice, "aep-kimi-link", "s-cancel-only", "req-1", "deny"); !errors.As(err, &re) || re.Code != wire.CodeUnsupported {
		t.Errorf("claimant without respond: %v, want %s", err, wire.CodeUnsupported)
	}

	bob := access.Principal{Name: "bob", Role: access.RoleWatch}
	if err := srv.Respond(ctx, bob, "aep-kimi-link", "s-rsp", "req-1", "deny"); !errors.As(err, &re) || re.Code != wire.CodeForbidden {
		t.Errorf("a watcher answering: %v, want %s", err, wire.CodeForbidden)
	}
	tgt.quiet(t, 100*time.Millisecond)

	watch := relaytest.RunServer(t, relay.Config{})
	if err := watch.Respond(ctx, alice, "aep-kimi-link", "s", "r", "o"); !errors.Is(err, relay.ErrWatchOnly) {
		t.Errorf("watch-only relay: %v", err)
	}
}

// fakeNotifier answers every path it serves with its name.
type fakeNotifier struct{}

func (fakeNotifier) AnswerLinks() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "links") })
}
func (fakeNotifier) API() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "api") })
}
func (fakeNotifier) Collectors() []prometheus.Collector { return nil }

// The answer links are open (their token is the credential); the API is
// behind the relay's token and refuses other origins.
func TestNotifierMount(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Notify: fakeNotifier{}})
	noAuth := map[string]string{"Authorization": ""}
	for _, tc := range []struct {
		method, path string
		hdr          map[string]string
		status       int
		body         string
	}{
		{"GET", relay.AnswerPath + "abc", noAuth, 200, "links"},
		{"POST", relay.AnswerPath + "abc", noAuth, 200, "links"},
		{"GET", relay.NotifyPath + "vapid", noAuth, 401, ""},
		{"GET", relay.NotifyPath + "vapid", nil, 200, "api"},
		{"POST", relay.NotifyPath + "subscriptions", map[string]string{"Origin": "https://evil.example"}, 403, ""},
	} {
		r := do(t, srv, tc.method, tc.path, nil, tc.hdr)
		if r.status != tc.status || (tc.body != "" && string(r.body) != tc.body) {
			t.Errorf("%s %s: %d %s, want %d %s", tc.method, tc.path, r.status, r.body, tc.status, tc.body)
		}
	}
}
