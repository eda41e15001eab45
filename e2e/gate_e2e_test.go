// The gate against Kimi's own hook timeout: killed hooks, pending lists,
// --on-timeout deny and control taking effect under a running `up`.

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest/pagetest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/setup"
)

// Kimi kills a held hook at its own timeout (here 5 s, while kimi-hook was
// told 60 s, so neither it nor the gate gives up first): each unanswered
// request is on the stream as expired, Kimi proceeding, at the moment its
// hook dies, and each tool's own completion follows. Three calls: each
// request closes with its own hook, none waits for the session's end.
func TestE2EGateHookKilledProceeds(t *testing.T) {
	// Serial: it bounds the lag behind Kimi's own hook timeout, which tests running beside it would stretch.
	kimi := kimiharness.Require(t)
	const kimiTimeout = 5 * time.Second
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1") // the default hold, 50 s
	dir := t.TempDir()
	markers := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")}
	script := stacktest.BashScript(t, "touch "+markers[0], "touch "+markers[1], "touch "+markers[2])
	hookCmd := fmt.Sprintf("%s --daemon %s --home %s", filepath.Join(stacktest.Binaries(t), "kimi-hook"), st.HookTo, st.Home)
	home, work, _ := stacktest.GateKimiHome(t, script, stacktest.HooksTOML(hookCmd, 10, int(kimiTimeout/time.Second), 60))
	stacktest.PrintKimi(t, kimi, home, work, "Run the commands.")
	st.WaitQuiet(t)
	for _, m := range markers {
		if _, err := os.Stat(m); err != nil {
			t.Fatalf("a tool did not run after its hook was killed: %v", err)
		}
	}
	name, _, ev := st.OneSession(t)
	stacktest.ValidateWithCLI(t, filepath.Join(st.Home, "logs", "kimi-code", name))
	pos := stacktest.Positions(ev)
	var ended *aep.Event
	requests, expiries, completions := map[string]*aep.Event{}, map[string]*aep.Event{}, map[string]*aep.Event{}
	for _, e := range ev {
		switch e.Type {
		case "attention.requested":
			requests[e.ID] = e
		case "attention.timeout":
			expiries[e.Subject] = e
		case "tool.completed":
			completions[e.Cause] = e
		case "session.ended":
			ended = e
		case "attention.resolved":
			t.Fatalf("a request was resolved (%v) instead of expiring with its hook", stacktest.DataOf(e))
		}
	}
	if len(requests) != 3 || len(expiries) != 3 || len(completions) != 3 || ended == nil {
		t.Fatalf("stream %v", stacktest.TypeCounts(ev))
	}
	for id, req := range requests {
		to := expiries[id]
		if to == nil {
			t.Fatalf("request %s never expired", id)
		}
		d := stacktest.DataOf(to)
		if d["reason"] != mapping.TimeoutHookEnded || d[mapping.DataOnExpiry] != mapping.OnExpiryAllow {
			t.Fatalf("expiry %v", d)
		}
		// Kimi's timeout runs from the hook's start, which is the request's
		// time (kimi-hook's read of its stdin) give or take its start-up.
		kimiGaveUp := stacktest.EventTime(t, req).Add(kimiTimeout)
		lag := stacktest.EventTime(t, to).Sub(kimiGaveUp)
		t.Logf("request %s: Kimi's timeout to the recorded proceed: %s", id, lag)
		if lag < -500*time.Millisecond || lag > stacktest.KimiTimeoutGap {
			t.Fatalf("the proceed was recorded %s from Kimi's timeout", lag)
		}
		tool := completions[req.Cause]
		if tool == nil || pos[tool.ID] < pos[to.ID] {
			for _, e := range ev {
				t.Logf("%s %s %s subject=%s cause=%s %v", e.Time, e.ID, e.Type, e.Subject, e.Cause, stacktest.DataOf(e))
			}
			t.Fatalf("the tool's completion does not follow its request's expiry: %v", stacktest.TypeCounts(ev))
		}
		if pos[to.ID] > pos[ended.ID] {
			t.Fatal("a request stayed open until the session ended")
		}
	}
}

// When Kimi kills a held hook, `pending` stops listing its request at once
// and `tail` shows it expired with Kimi proceeding.
func TestE2EGateKilledHookLeavesPending(t *testing.T) {
	// Serial: it bounds the lag behind Kimi's own hook timeout, which tests running beside it would stretch.
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=45000")
	session := "term-" + strings.ToLower(aep.NewID())
	kill := st.HeldHookGroup(t, session, "call_1", "rm -rf /tmp/gone")
	st.WaitCLI(t, func(s string) bool { return strings.Contains(s, "rm -rf /tmp/gone") }, "pending")
	killed := time.Now()
	kill()
	st.WaitCLI(t, func(s string) bool { return strings.TrimSpace(s) == "nothing waits on you" }, "pending")
	t.Logf("pending dropped the request %s after the hook was killed", time.Since(killed))
	if lag := time.Since(killed); lag > stacktest.KimiTimeoutGap {
		t.Fatalf("pending listed the request for %s after its hook died", lag)
	}
	out := st.WaitCLI(t, func(s string) bool { return strings.Contains(s, "nobody answered") },
		"tail", "--from", "all", "--once", "--state", "none")
	if !strings.Contains(out, "proceeded: Kimi stopped waiting") || strings.Contains(out, "aep-kimi respond") {
		t.Fatalf("tail does not show the expiry:\n%s", out)
	}
}

// Control in one step, with the hooks registered the plain way first (the
// trap of issue 24): `up --control` reads the 10 s PreToolUse timeout from
// Kimi's config.toml, holds a call 8 s at most and says so, and names
// `aep-setup write kimi-code --control`; `aep-setup check` fails on the
// mismatch until that is run. The unanswered call is on the stream as
// proceeding when its request said it would (expires_at), before Kimi's
// own timeout, and the tool's completion follows.
func TestE2EUpControlKeepsWithinKimi(t *testing.T) {
	// Serial: it bounds the lag behind Kimi's own hook timeout, which tests running beside it would stretch.
	kimi := kimiharness.Require(t)
	st := stacktest.NewUpStack(t)
	marker := filepath.Join(t.TempDir(), "ran")
	mock := kimiharness.StartMock(t, stacktest.MarkerScript(t, marker))
	home, work := t.TempDir(), t.TempDir()
	kimiharness.WriteWebConfig(t, home, mock.Port)
	write := []string{"write", "kimi-code", "--home", home, "--daemon", st.HookTo, "--aep-home", st.Home, "--kimi-version", "2.1.0"}
	if code, out := stacktest.SetupCLI(t, write...); code != 0 {
		t.Fatalf("aep-setup write: exit %d\n%s", code, out)
	}
	up := st.Up(t, nil, "--control", "--web=false", "--kimi-home", home)
	banner := up.Logs.String()
	for _, want := range []string{"gate ON: each tool call held up to 8s", "then Kimi runs it",
		"Kimi's PreToolUse timeout (10s) cuts the hold short", "1. register the hooks with Kimi:  aep-setup write kimi-code --control\n"} {
		if !strings.Contains(banner, want) {
			t.Fatalf("up's banner lacks %q:\n%s", want, banner)
		}
	}
	check := []string{"check", "kimi-code", "--home", home, "--daemon", st.HookTo, "--aep-home", st.Home, "--kimi-version", "2.1.0"}
	code, out := stacktest.SetupCLI(t, check...)
	if code != 1 || !strings.Contains(out, "Kimi's PreToolUse timeout is 10s") || !strings.Contains(out, "run `aep-setup write kimi-code --control`") {
		t.Fatalf("aep-setup check with the gate on and a 10 s registration: exit %d\n%s", code, out)
	}

	stacktest.PrintKimi(t, kimi, home, work, "Create the marker file.")
	st.WaitQuiet(t)
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("the tool did not run after nobody answered")
	}
	_, _, ev := st.OneSession(t)
	pos := stacktest.Positions(ev)
	var req, to, done *aep.Event
	for _, e := range ev {
		switch e.Type {
		case "attention.requested":
			req = e
		case "attention.timeout":
			to = e
		case "tool.completed":
			done = e
		}
	}
	if req == nil || to == nil || done == nil || to.Subject != req.ID || pos[done.ID] < pos[to.ID] {
		t.Fatalf("stream %v", stacktest.TypeCounts(ev))
	}
	if d := stacktest.DataOf(to); d["reason"] != mapping.TimeoutDeadline || d[mapping.DataOnExpiry] != mapping.OnExpiryAllow {
		t.Fatalf("expiry %v", d)
	}
	if d := stacktest.DataOf(req); d[mapping.DataOnExpiry] != mapping.OnExpiryAllow {
		t.Fatalf("the request does not say what happens at its deadline: %v", d)
	}
	expires, _ := time.Parse(time.RFC3339Nano, stacktest.DataOf(req)["expires_at"].(string))
	proceeded := stacktest.EventTime(t, to)
	kimiGaveUp := stacktest.EventTime(t, req).Add(10 * time.Second)
	t.Logf("announced deadline to the recorded proceed: %s; Kimi's timeout to the recorded proceed: %s",
		proceeded.Sub(expires), proceeded.Sub(kimiGaveUp))
	if late := proceeded.Sub(expires); late < 0 || late > 500*time.Millisecond {
		t.Fatalf("the proceed was recorded %s from the deadline the request announced", late)
	}
	if lag := proceeded.Sub(kimiGaveUp); lag > 0 || lag < -stacktest.KimiTimeoutGap-200*time.Millisecond {
		t.Fatalf("the proceed was recorded %s from Kimi's timeout", lag)
	}

	if code, out := stacktest.SetupCLI(t, append(write, "--control")...); code != 0 {
		t.Fatalf("aep-setup write --control: exit %d\n%s", code, out)
	}
	if code, out := stacktest.SetupCLI(t, check...); code != 0 {
		t.Fatalf("aep-setup check after the fix: exit %d\n%s", code, out)
	}
}

// With --on-timeout deny the gate answers deny itself just before Kimi
// stops waiting: the tool does not run, the stream says it expired and was
// denied by policy, and the model is told why.
func TestE2EGateOnTimeoutDeny(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_KIMI_ON_TIMEOUT=deny", "AEP_ATTENTION_TIMEOUT_MS=3000")
	marker := filepath.Join(t.TempDir(), "ran")
	run := stacktest.Scenario(t, kimi, stacktest.MarkerScript(t, marker), st.HookCmd(t))
	st.WaitQuiet(t)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the tool ran although nobody answered and the gate denies at its deadline")
	}
	_, _, ev := st.OneSession(t)
	c := stacktest.TypeCounts(ev)
	if c["attention.timeout"] != 1 || c["tool.denied"] != 1 || c["tool.failed"] != 1 || c["tool.completed"] != 0 {
		t.Fatalf("stream %v", c)
	}
	for _, e := range ev {
		if e.Type == "attention.timeout" {
			if d := stacktest.DataOf(e); d["reason"] != mapping.TimeoutDeadline || d[mapping.DataOnExpiry] != mapping.OnExpiryDeny {
				t.Fatalf("expiry %v", d)
			}
		}
	}
	if reqs := run.Mock.Requests(t); !strings.Contains(strings.Join(reqs, "\n"), "AEP_KIMI_ON_TIMEOUT=deny") {
		t.Fatal("the model was not told why the call was denied")
	}
}

// The page shows a waiting call's time left with what happens at zero,
// counting down, and drops the request the moment Kimi stops waiting for it
// (in Chromium, against the real relay and adapter).
func TestE2EPageCountdown(t *testing.T) {
	// Serial: it bounds the lag behind Kimi's own hook timeout, which tests running beside it would stretch.
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_KIMI_ON_TIMEOUT=deny", "AEP_ATTENTION_TIMEOUT_MS=45000")
	b := pagetest.OpenPage(t, st)
	kill := st.HeldHookGroup(t, "page-"+strings.ToLower(aep.NewID()), "call_1", "rm -rf /tmp/page")
	const countdown = `((document.querySelector('[data-attention] [data-countdown]') || {}).textContent || '')`
	b.WaitJS("the countdown on the waiting call", countdown+`.match(/^ · denied in \d+s$/) !== null`)
	const secs = `Number((` + countdown + `.match(/(\d+)s$/) || [])[1])`
	var first int
	b.Eval("the countdown", secs, &first)
	if first > 45 || first < 30 {
		t.Fatalf("the countdown starts at %ds of a 45 s hold", first)
	}
	b.WaitJS("the countdown ticks down", fmt.Sprintf(`%s < %d`, secs, first))
	killed := time.Now()
	kill()
	b.WaitJS("the request leaves the inbox", `document.querySelector('[data-attention]') === null`)
	t.Logf("the page dropped the request %s after the hook was killed", time.Since(killed))
	if lag := time.Since(killed); lag > stacktest.KimiTimeoutGap {
		t.Fatalf("the page showed the request for %s after its hook died", lag)
	}
}

// Control takes effect without a restart (issue 36): under a running `up
// --control` whose hooks were registered the plain way (a 10 s PreToolUse
// timeout: an 8 s hold), `aep-setup write kimi-code --control` gives the
// next held call, run by the command now registered, the full 50 s
// deadline, and check says so. With up stopped, check does not call the
// --control registration stale (its advice would undo control).
func TestE2EUpControlFollowsRegistration(t *testing.T) {
	t.Parallel()
	st := stacktest.NewUpStack(t)
	home := t.TempDir()
	write := []string{"write", "kimi-code", "--home", home, "--daemon", st.HookTo, "--aep-home", st.Home, "--kimi-version", "2.1.0",
		"--hook-cmd", filepath.Join(stacktest.Binaries(t), "kimi-hook")}
	if code, out := stacktest.SetupCLI(t, write...); code != 0 {
		t.Fatalf("aep-setup write: exit %d\n%s", code, out)
	}
	up := st.Up(t, nil, "--control", "--web=false", "--kimi-home", home)
	if !strings.Contains(up.Logs.String(), "gate ON: each tool call held up to 8s") {
		t.Fatalf("up's banner:\n%s", up.Logs.String())
	}
	if code, out := stacktest.SetupCLI(t, append(write, "--control")...); code != 0 || !strings.Contains(out, "the running adapter holds the next tool call up to 50s") {
		t.Fatalf("aep-setup write --control under up --control: exit %d\n%s", code, out)
	}
	check := []string{"check", "kimi-code", "--home", home, "--daemon", st.HookTo, "--aep-home", st.Home, "--kimi-version", "2.1.0"}
	if code, out := stacktest.SetupCLI(t, check...); code != 0 {
		t.Fatalf("aep-setup check after write --control: exit %d\n%s", code, out)
	}

	reg, err := setup.Registered(home)
	if err != nil {
		t.Fatal(err)
	}
	session := "reg-" + strings.ToLower(aep.NewID())
	b, _ := json.Marshal(stacktest.BashCall(session, "call_1", "make deploy"))
	hook := exec.Command("sh", "-c", reg[mapping.HookPreToolUse].Command)
	hook.Stdin = bytes.NewReader(b)
	kimiharness.OwnGroup(hook)
	if err := hook.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kimiharness.SignalGroup(hook.Process, syscall.SIGKILL); hook.Wait() })
	var req *aep.Event
	if !poll.Until(10*time.Second, func() bool {
		for _, e := range stacktest.ParseLines(t, append(bytes.Join(st.RelayEvents(t, session), []byte("\n")), '\n')) {
			if e.Type == "attention.requested" {
				req = e
			}
		}
		return req != nil
	}) {
		t.Fatal("the held call's request never reached the relay")
	}
	expires, err := time.Parse(time.RFC3339Nano, stacktest.DataOf(req)["expires_at"].(string))
	if err != nil {
		t.Fatal(err)
	}
	hold := expires.Sub(stacktest.EventTime(t, req))
	t.Logf("the next held call's deadline: %s after its request", hold)
	if hold < 45*time.Second || hold > 50*time.Second {
		t.Fatalf("the next held call holds %s, want the --control registration's 50s", hold)
	}

	up.Stop(t)
	code, out := stacktest.SetupCLI(t, check...)
	if code != 0 || strings.Contains(out, "stale") || !strings.Contains(out, "registered with --control") {
		t.Fatalf("aep-setup check with up stopped: exit %d\n%s", code, out)
	}
}
