// The fleet page in Chromium on real Kimi sessions: a held call denied,
// a relay restart, and the labels and words a person reads.

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest/pagetest"
)

// A real Kimi session under the held gate: the page shows it live, the held
// PreToolUse waits in the inbox, clicking Deny blocks the tool (its side
// effect never happens), the reason typed in the reply field reaches the
// model with the deny, and the page shows what the stream settled.
func TestE2EPageDeny(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=8000")
	b := pagetest.OpenPage(t, st)
	marker := filepath.Join(t.TempDir(), "side-effect")
	script := stacktest.MarkerScript(t, marker)
	out := make(chan kimiharness.PrintRun, 1)
	go func() { out <- stacktest.Scenario(t, kimi, script, st.HookCmd(t)) }()
	b.WaitJS("the session appears live", `document.querySelector('[data-session]') !== null`)
	b.WaitJS("the held call's Deny button", `document.querySelector('[data-attention] [data-option="deny"]') !== null`)
	var session, request string
	b.Eval("the session", `document.querySelector('[data-attention]').dataset.session`, &session)
	b.Eval("the request", `document.querySelector('[data-attention]').dataset.attention`, &request)
	const reason = "not on this machine, use the staging box"
	b.MustRun("type the reason", chromedp.SendKeys(`[data-attention] [data-reply]`, reason, chromedp.ByQuery))
	b.Click("click Deny", `[data-attention] [data-option="deny"]`)
	run := <-out
	if reqs := run.Mock.Requests(t); !strings.Contains(strings.Join(reqs, "\n"), reason) {
		t.Errorf("the model never saw the reason typed with the deny %q", reason)
	}
	st.WaitQuiet(t)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the denied tool ran: its side effect happened")
	}
	b.WaitJS("the request leaves the inbox", `document.querySelector('[data-attention]') === null`)
	var types []string
	b.Eval("the page's story", `aepFleet.S.ordered(aepFleet.state, `+browsertest.Quote(session)+`).map(e => e.type)`, &types)
	for _, want := range []string{"control.accepted", "attention.answered", "attention.resolved", "tool.denied"} {
		if !slices.Contains(types, want) {
			t.Errorf("the page never showed %s: %v", want, types)
		}
	}
	var answer string
	b.Eval("the answer", `JSON.stringify(aepFleet.S.session(aepFleet.state, `+browsertest.Quote(session)+`).attention.get(`+browsertest.Quote(request)+`).answer)`, &answer)
	var a map[string]any
	if json.Unmarshal([]byte(answer), &a) != nil || a["option"] != "deny" || a["text"] != reason {
		t.Errorf("settled answer %s, want option deny with the reason", answer)
	}
	_, _, ev := st.OneSession(t)
	want := stacktest.LogIDs(ev)
	if got := pagetest.PageSeqIDs(b, session, len(want)); !slices.Equal(got, want) {
		t.Errorf("the page holds %d events, the log %d: they differ\npage %v\nlog  %v", len(got), len(want), got, want)
	}
}

// The relay restarts in the middle of a real Kimi session: the page resumes
// from its per-session positions and ends holding exactly the session's
// events, each once, in order.
func TestE2EPageRelayRestart(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t)
	b := pagetest.OpenPage(t, st)
	done := stacktest.Async(t, func() kimiharness.PrintRun {
		return stacktest.Scenario(t, kimi, stacktest.SlowScenario(t, "page"), st.HookCmd(t))
	})
	b.WaitJS("two tool calls on the page", `[...aepFleet.state.sessions.keys()].some(s => aepFleet.S.session(aepFleet.state, s).tools >= 2)`)
	st.Relay.Kill()
	b.WaitJS("the page sees the relay go", `document.getElementById('conn').dataset.conn !== 'live'`)
	port := strings.TrimPrefix(st.RelayURL, "http://127.0.0.1:")
	st.Relay = stacktest.StartDaemon(t, st.RelayURL, []string{"AEP_TOKEN=" + st.Token, "AEP_HOME=" + st.Home}, "relay", "--listen", "127.0.0.1:"+port)
	<-done
	st.WaitQuiet(t)
	b.WaitJS("live again", `document.getElementById('conn').dataset.conn === 'live'`)
	_, _, ev := st.OneSession(t)
	session := ev[0].Session
	b.WaitJS("the session ended on the page", `document.querySelector('[data-session=`+browsertest.Quote(session)+`][data-state="ended"]') !== null`)
	want := stacktest.LogIDs(ev)
	if got := pagetest.PageSeqIDs(b, session, len(want)); !slices.Equal(got, want) {
		t.Errorf("after the restart the page holds %d events, the log %d: gap or duplicate\npage %v\nlog  %v", len(got), len(want), got, want)
	}
}

// A real `kimi -p` session in a directory named acme-shop, its call held:
// the page's fleet row says acme-shop and no session_ prefix, and neither
// the fleet list nor the inbox shows a raw event type name. The project
// rides on session.started's cwd, which AEP-0002 gates at capture redacted.
func TestE2EPageLabelsAndWords(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=20000", "AEP_CAPTURE=redacted")
	b := pagetest.OpenPage(t, st)
	script := stacktest.MarkerScript(t, filepath.Join(t.TempDir(), "side-effect"))
	s, err := kimiharness.ReadScript(script)
	if err != nil {
		t.Fatal(err)
	}
	home, work := t.TempDir(), filepath.Join(t.TempDir(), "acme-shop")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	mock := kimiharness.StartMock(t, script)
	kimiharness.WriteConfig(t, home, mock.Port, st.HookCmd(t))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	done := make(chan string, 1)
	go func() { out, _ := kimiharness.Print(ctx, kimi, home, work, s.Prompt); done <- out }()

	b.WaitJS("the held call in the inbox", `document.querySelector('[data-attention] [data-option="deny"]') !== null`)
	var title string
	b.Eval("the fleet row's label", `document.querySelector('#fleet [data-session] .title').textContent`, &title)
	if !strings.Contains(title, "acme-shop") || strings.Contains(title, "session_") {
		t.Errorf("fleet row label %q: want acme-shop, without session_", title)
	}
	var seen struct {
		Fleet, Inbox string
		Types        []string
	}
	b.Eval("what the page shows", `(() => {
		const s = document.querySelector('#fleet [data-session]').dataset.session;
		return { fleet: document.getElementById('fleet').innerText, inbox: document.getElementById('inbox').innerText,
			types: [...new Set(aepFleet.S.ordered(aepFleet.state, s).map((e) => e.type))] };
	})()`, &seen)
	if len(seen.Types) < 3 {
		t.Fatalf("the page holds only %v", seen.Types)
	}
	for _, typ := range seen.Types {
		for where, text := range map[string]string{"fleet list": seen.Fleet, "inbox": seen.Inbox} {
			if strings.Contains(text, typ) {
				t.Errorf("the %s shows the event type %s:\n%s", where, typ, text)
			}
		}
	}
	if strings.Contains(seen.Fleet+seen.Inbox, "session_") {
		t.Errorf("a session_ id in the fleet list or inbox:\nfleet: %s\ninbox: %s", seen.Fleet, seen.Inbox)
	}
	t.Logf("fleet list: %s\ninbox: %s", seen.Fleet, seen.Inbox)
	b.Click("click Deny", `[data-attention] [data-option="deny"]`)
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("kimi never finished")
	}
	// The session's timeline says it in the terminal's words, the person
	// who denied as a person, the request before what became of the call;
	// type names only behind the details toggles.
	b.Click("open the session", `#fleet [data-session] button.row`)
	b.WaitJS("the deny in words", `document.getElementById('timeline').innerText.includes('denied by owner from the page')`)
	var timeline string
	b.Eval("the timeline", `document.getElementById('timeline').innerText`, &timeline)
	b.Eval("what the page holds", `[...new Set(aepFleet.S.ordered(aepFleet.state, document.querySelector('#fleet [data-session]').dataset.session).map((e) => e.type))]`, &seen.Types)
	for _, typ := range seen.Types {
		if strings.Contains(timeline, typ) {
			t.Errorf("the timeline shows the event type %s outside its details:\n%s", typ, timeline)
		}
	}
	for _, want := range []string{"Turn 1 · finished", "Kimi wants to use Bash", "denied by owner from the page", "Bash did not run"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the timeline lacks %q:\n%s", want, timeline)
		}
	}
	t.Logf("timeline: %s", timeline)
}
