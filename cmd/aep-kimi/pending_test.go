package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

// attnEvent is an event of session at time at (seq in order of the calls per
// session, counted by seqs).
func attnEvent(seqs map[string]int64, session, typ, subject string, at time.Time, data map[string]any) *aep.Event {
	e := &aep.Event{AEP: "0.1", ID: aep.NewID(), Type: typ, Subject: subject, Time: aep.FormatTime(at),
		Source: "aep://h/agent/kimi-code/session/" + session, Agent: "kimi-code", Session: session,
		Seq: aep.Int64(seqs[session]), Epoch: aep.Int64(0), Severity: "notice"}
	seqs[session]++
	if data == nil {
		data = map[string]any{}
	}
	_ = e.SetData(data)
	return e
}

func gateData(prompt string, expires time.Time) map[string]any {
	return map[string]any{"kind": "permission", "prompt": prompt, "respond_via": []any{"control"},
		"expires_at": aep.FormatTime(expires),
		"options":    []any{map[string]any{"id": "allow", "label": "Allow"}, map[string]any{"id": "deny", "label": "Deny"}}}
}

type pendingFixture struct {
	srv       *relaytest.Server
	tokenFile string
	ids       map[string]string
}

// fleetFixture posts, to a real relay, requests in every state: waiting
// (control and oob), answered, timed out, past their expiry, and left open
// by a session that ended.
func fleetFixture(t *testing.T) pendingFixture {
	t.Helper()
	srv := relaytest.RunServer(t, relay.Config{Token: "tok"})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	seqs := map[string]int64{}
	ids := map[string]string{}
	req := func(name, session string, age time.Duration, data map[string]any) *aep.Event {
		e := attnEvent(seqs, session, "attention.requested", "Bash", now.Add(-age), data)
		ids[name] = e.ID
		return e
	}
	var evs []*aep.Event
	add := func(e ...*aep.Event) { evs = append(evs, e...) }
	add(attnEvent(seqs, "sa", "session.started", "", now.Add(-time.Hour), map[string]any{"label": "Clean up the cluster"}))
	add(req("waiting", "sa", 10*time.Second, gateData("Kimi wants to use Bash: kubectl delete pod x", now.Add(40*time.Second))))
	answered := req("answered", "sa", 20*time.Second, gateData("Kimi wants to use Bash: ls", now.Add(30*time.Second)))
	add(answered,
		attnEvent(seqs, "sa", "attention.answered", answered.ID, now, map[string]any{"answer": map[string]any{"option": "allow"}}),
		attnEvent(seqs, "sa", "attention.resolved", answered.ID, now, map[string]any{"resolution": "answered"}))
	timedOut := req("timed out", "sb", 90*time.Second, gateData("Kimi wants to use Bash: rm x", now.Add(-40*time.Second)))
	add(timedOut, attnEvent(seqs, "sb", "attention.timeout", timedOut.ID, now, map[string]any{"after_ms": 50000}))
	add(req("past expiry", "sb", 70*time.Second, gateData("Kimi wants to use Bash: rm y", now.Add(-time.Second))))
	add(req("oob", "sc", 30*time.Second, map[string]any{"kind": "permission", "prompt": "Run `rm -rf build`?", "respond_via": []any{"oob"}}))
	add(req("session ended", "sd", 5*time.Second, gateData("Kimi wants to use Bash: make", now.Add(time.Minute))),
		attnEvent(seqs, "sd", "session.ended", "", now, map[string]any{"reason": "normal"}))
	add(req("two-1", "se", 3*time.Second, gateData("Kimi wants to use Bash: a", now.Add(time.Minute))),
		req("two-2", "se", 2*time.Second, gateData("Kimi wants to use Bash: b", now.Add(time.Minute))))
	srv.Post(t, evs...)
	return pendingFixture{srv: srv, tokenFile: tokenFile, ids: ids}
}

func TestPendingListsWhatWaits(t *testing.T) {
	fx := fleetFixture(t)
	code, out, errOut := runIn(t, "pending", "--relay", fx.srv.URL, "--token-file", fx.tokenFile)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, gone := range []string{"answered", "timed out", "past expiry", "session ended"} {
		if strings.Contains(out, fx.ids[gone]) {
			t.Errorf("the %s request is listed:\n%s", gone, out)
		}
	}
	// Oldest first: oob (30s), waiting (10s), two-1 (3s), two-2 (2s).
	last := -1
	for _, name := range []string{"oob", "waiting", "two-1", "two-2"} {
		i := strings.Index(out, fx.ids[name])
		if i < 0 || i < last {
			t.Fatalf("%s missing or out of order:\n%s", name, out)
		}
		last = i
	}
	for _, want := range []string{
		"4 requests wait on you",
		"Clean up the cluster · sa  request " + fx.ids["waiting"],
		"Kimi wants to use Bash: kubectl delete pod x (permission)",
		"options allow, deny",
		"aep-kimi respond --relay " + fx.srv.URL + " --option deny sa " + fx.ids["waiting"],
		"answer it in Kimi itself (respond_via oob)",
		"no deadline",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`waiting 1[01]s · (39|40)s left`).MatchString(out) {
		t.Errorf("age and time left of the waiting request:\n%s", out)
	}
}

func TestPendingNothingAndErrors(t *testing.T) {
	srv := relaytest.RunServer(t, relay.Config{Token: "tok"})
	tf := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tf, []byte("tok"), 0o600)
	code, out, errOut := runIn(t, "pending", "--relay", srv.URL, "--token-file", tf)
	if code != 0 || strings.TrimSpace(out) != "nothing waits on you" {
		t.Fatalf("empty relay: exit %d out %q err %q", code, out, errOut)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("nope"), 0o600)
	for name, c := range map[string]struct {
		args []string
		code int
		msg  string
	}{
		"wrong token":   {[]string{"--relay", srv.URL, "--token-file", bad}, 1, "HTTP 403"},
		"unreachable":   {[]string{"--relay", "http://127.0.0.1:1", "--token-file", tf}, 1, "unreachable"},
		"not a URL":     {[]string{"--relay", "ftp://x", "--token-file", tf}, 1, "not an http(s) URL"},
		"stray operand": {[]string{"extra"}, 2, "unexpected argument"},
	} {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := runIn(t, "pending", c.args...)
			if code != c.code || !strings.Contains(errOut, c.msg) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Fatalf("exit %d stderr %q; want exit %d and one line naming %q", code, errOut, c.code, c.msg)
			}
		})
	}
}

// respond checks its target against the replay before sending: each kind of
// wrong target gets one line and its own exit code; a session's one pending
// request is found without its id (here no adapter owns the session, so the
// relay refuses the command: exit 3 proves it was sent to that request).
func TestRespondTargets(t *testing.T) {
	fx := fleetFixture(t)
	base := []string{"--relay", fx.srv.URL, "--token-file", fx.tokenFile, "--window", "2s", "--option", "deny"}
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"unknown session", []string{"nosuch"}, exitUnknownSession, `unknown session "nosuch"`},
		{"unknown request", []string{"sa", "01NOSUCH"}, exitUnknownRequest, `unknown request "01NOSUCH"`},
		{"request of another session", []string{"sb", fx.ids["waiting"]}, exitUnknownRequest, "unknown request"},
		{"answered request", []string{"sa", fx.ids["answered"]}, exitNotPending, "no longer waits (answered)"},
		{"timed out request", []string{"sb", fx.ids["timed out"]}, exitNotPending, "no longer waits (expired)"},
		{"past expiry", []string{"sb", fx.ids["past expiry"]}, exitNotPending, "no longer waits (expired)"},
		{"oob request", []string{"sc", fx.ids["oob"]}, exitNotPending, "answer it in Kimi itself"},
		{"oob session", []string{"sc"}, exitNotPending, "answer it in Kimi itself"},
		{"nothing pending", []string{"sb"}, exitNotPending, "has no pending request"},
		{"ended session", []string{"sd"}, exitNotPending, "has no pending request"},
		{"one pending, found", []string{"sa"}, exitRejected, "rejected by the relay: no-route"},
		{"named, found", []string{"sa", fx.ids["waiting"]}, exitRejected, "rejected by the relay: no-route"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, _, errOut := runIn(t, "respond", append(base, c.args...)...)
			if code != c.code || !strings.Contains(errOut, c.msg) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Fatalf("exit %d stderr %q; want exit %d and one line naming %q", code, errOut, c.code, c.msg)
			}
		})
	}
	code, _, errOut := runIn(t, "respond", append(base, "se")...)
	if code != exitSeveralPending || !strings.Contains(errOut, fx.ids["two-1"]) || !strings.Contains(errOut, fx.ids["two-2"]) ||
		!strings.Contains(errOut, "has 2 pending requests; name one") {
		t.Fatalf("several pending: exit %d:\n%s", code, errOut)
	}
	for _, bad := range [][]string{{}, {"a", "b", "c"}} {
		if code, _, _ := runIn(t, "respond", append(base, bad...)...); code != 2 {
			t.Errorf("args %q: exit %d, want 2", bad, code)
		}
	}
}
