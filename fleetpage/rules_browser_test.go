package fleetpage_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/rules"
)

// gateAsk is the adapter's held request for Bash running command, at
// capture redacted (its prompt carries the argument text).
func gateAsk(id, command string) map[string]any {
	return map[string]any{"id": id, "subject": "Bash", "capture": "redacted", "severity": "notice", "data": map[string]any{
		"kind": "permission", "prompt": "Kimi wants to use Bash: " + command, "tool": map[string]any{"name": "Bash", "call_id": id},
		"options":     []any{map[string]any{"id": "allow", "label": "Allow"}, map[string]any{"id": "deny", "label": "Deny"}},
		"respond_via": []any{"control"},
	}}
}

// In Chromium: an answer becomes a rule ("Allow, and always allow Bash
// `go *` in aep-kimi/", the proposed pattern edited first), and that rule
// answers the next matching call with no person, which never shows in the
// inbox; a pattern that does not match the request is refused and nothing
// is sent; the rules view lists the rules with their uses and removes one;
// a wildcard over a destructive command needs a confirm past a warning.
func TestBrowserRules(t *testing.T) {
	b := browsertest.New(t, 1200, 900)
	book := rules.Open(rules.Config{Path: filepath.Join(t.TempDir(), rules.FileName)})
	if _, err := book.Add(rules.Rule{ID: "no-curl", Effect: rules.Deny, Tool: "Bash", Args: "curl *", Note: "no network"}); err != nil {
		t.Fatal(err)
	}
	page, err := fleetpage.New(fleetpage.Config{Token: testToken, LoginsFile: filepath.Join(t.TempDir(), "page-login.key")})
	if err != nil {
		t.Fatal(err)
	}
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Page: page, Rules: book})
	em := dialEmitter(t, srv.URL)
	first, second := aep.NewID(), aep.NewID()
	em.send(
		em.event("s1", "session.started", 0, map[string]any{"capture": "redacted", "data": map[string]any{"label": "ship it", "cwd": "~/src/aep-kimi"}}),
		em.event("s1", "attention.requested", -1, gateAsk(first, "go test ./...")),
	)

	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(srv.URL, testToken)))
	always := sel("data-always", first)
	b.WaitJS("the proposed rule", `(document.querySelector('`+sel("data-attention", first)+` [data-always-pattern]')||{}).value === 'go test *'`)
	var label string
	b.Eval("the scope", `document.querySelector('`+sel("data-attention", first)+` [data-always-scope]').selectedOptions[0].textContent`, &label)
	if label != "in aep-kimi/" {
		t.Fatalf("scope %q, want the session's project", label)
	}
	b.WaitJS("the rules view", `document.querySelector('[data-rule="no-curl"]') !== null && document.getElementById('rules-count').textContent === '1'`)

	setPattern := func(v string) {
		b.MustRun("edit the pattern", chromedp.Evaluate(`(e => { e.value = `+browsertest.Quote(v)+`; e.dispatchEvent(new Event('input')); })(document.querySelector('`+sel("data-attention", first)+` [data-always-pattern]'))`, nil))
	}
	// A pattern that does not match the request's own arguments is refused:
	// no rule, no answer.
	setPattern("git *")
	b.Click("save a wrong pattern", always)
	b.WaitJS("the refusal", `(document.querySelector('`+sel("data-attention", first)+` [data-note]')||{}).textContent?.includes('does not match this request')`)
	if n := book.Set().Len(); n != 1 {
		t.Fatalf("a refused pattern was saved: %d rules", n)
	}
	// The edit survives the re-render the refusal caused.
	setPattern("go *")
	b.Click("allow, and always allow", always)
	cmd := em.command()
	if cmd["type"] != "control.attention.respond" || cmd["subject"] != first || cmd["agent"] != "aep-kimi-page" {
		t.Fatalf("the page's answer: %v", cmd)
	}
	var saved *rules.Rule
	for _, r := range book.Set().Rules() {
		if r.Args == "go *" {
			saved = &r
		}
	}
	if saved == nil || saved.Effect != rules.Allow || saved.Tool != "Bash" || saved.Project != "~/src/aep-kimi" || saved.Agent != "kimi-code" {
		t.Fatalf("saved %+v", book.Set().Rules())
	}
	b.WaitJS("the new rule listed", `document.querySelector('`+sel("data-rule", saved.ID)+`') !== null`)

	// The next matching call is the rule's: no person, never in the inbox.
	em.send(em.event("s1", "attention.requested", -1, gateAsk(second, "go vet ./...")))
	cmd = em.command()
	if cmd["subject"] != second || cmd["agent"] != "rule:"+saved.ID {
		t.Fatalf("the second call was not answered by rule %s: %v", saved.ID, cmd)
	}
	b.WaitJS("the page folded the second request", `window.aepFleet.S.session(window.aepFleet.state, 's1').attention.get(`+browsertest.Quote(second)+`)?.rule === `+browsertest.Quote(saved.ID))
	var shown bool
	b.Eval("the inbox", `document.querySelector('`+sel("data-attention", second)+`') !== null`, &shown)
	if shown {
		t.Fatal("a request a rule answered reached the inbox")
	}

	// Removing a rule in the view removes it from the relay; the list shows
	// the new rule's use.
	b.Click("remove no-curl", `[data-rule-remove="no-curl"]`)
	b.WaitJS("no-curl gone", `document.querySelector('[data-rule="no-curl"]') === null`)
	for _, r := range book.Set().Rules() {
		if r.ID == "no-curl" {
			t.Fatal("the removed rule is still in force")
		}
	}
	var uses string
	b.Eval("uses", `document.querySelector('`+sel("data-rule", saved.ID)+` [data-uses]').dataset.uses`, &uses)
	if strings.TrimSpace(uses) != "1" {
		t.Fatalf("the view shows %q uses, want 1", uses)
	}

	// "Always" has a floor: rm -rf ./build is proposed exactly, and a
	// wildcard over it is saved only past a visible warning, on a second,
	// deliberate click.
	third := aep.NewID()
	em.send(em.event("s1", "attention.requested", -1, gateAsk(third, "rm -rf ./build")))
	item := sel("data-attention", third)
	b.WaitJS("the exact proposal", `(document.querySelector('`+item+` [data-always-pattern]')||{}).value === 'rm -rf ./build'`)
	b.MustRun("widen the pattern", chromedp.Evaluate(`(e => { e.value = 'rm *'; e.dispatchEvent(new Event('input')); })(document.querySelector('`+item+` [data-always-pattern]'))`, nil))
	b.Click("save rm *", sel("data-always", third))
	b.WaitJS("the warning", `(document.querySelector('`+sel("data-always-danger", third)+`')||{}).textContent?.includes('rm (rm -rf /)')`)
	var visible bool
	b.Eval("the warning shows", `(e => e.getBoundingClientRect().height > 0 && getComputedStyle(e).display !== 'none')(document.querySelector('`+sel("data-always-danger", third)+`'))`, &visible)
	if !visible {
		t.Fatal("the warning is not visible")
	}
	for _, r := range book.Set().Rules() {
		if r.Args == "rm *" {
			t.Fatal("rm * was saved without the confirm")
		}
	}
	select {
	case f := <-em.frames:
		if typ, _ := f["type"].(string); strings.HasPrefix(typ, "control.") {
			t.Fatalf("an answer went before the confirm: %v", f)
		}
	default:
	}
	b.Click("confirm", sel("data-always-confirm", third))
	if cmd := em.command(); cmd["subject"] != third || cmd["agent"] != "aep-kimi-page" {
		t.Fatalf("the confirmed answer: %v", cmd)
	}
	wide := false
	for _, r := range book.Set().Rules() {
		wide = wide || r.Args == "rm *" && r.Effect == rules.Allow
	}
	if !wide {
		t.Fatalf("the confirmed rule was not saved: %+v", book.Set().Rules())
	}
}

// brokenWords lists the words (runs of letters and digits) of the visible
// text under the element with id root that a line break cuts: "Eff/ec/t".
const brokenWords = `((root) => {
  const bad = [];
  const w = document.createTreeWalker(document.getElementById(root), NodeFilter.SHOW_TEXT);
  for (let n = w.nextNode(); n; n = w.nextNode()) {
    const re = /[\p{L}\p{N}]+/gu;
    for (let m = re.exec(n.data); m; m = re.exec(n.data)) {
      const r = document.createRange();
      r.setStart(n, m.index);
      r.setEnd(n, m.index + m[0].length);
      const lines = new Set([...r.getClientRects()].filter((x) => x.width > 0).map((x) => Math.round(x.top)));
      if (lines.size > 1) bad.push(m[0]);
    }
  }
  return bad;
})`

// The rules view reads at a laptop's width and a phone's: no word of it is
// cut by a line break, nothing is wider than the screen, and each rule
// shows its uses and when it was last used.
func TestBrowserRulesLegible(t *testing.T) {
	b := browsertest.New(t, 1280, 900)
	book := rules.Open(rules.Config{Path: filepath.Join(t.TempDir(), rules.FileName)})
	add := func(r rules.Rule) rules.Rule {
		t.Helper()
		got, err := book.Add(r)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	used := add(rules.Rule{Effect: rules.Allow, Tool: "Bash", Args: "go test *", Project: "~/src/aep-kimi", Note: "the unit tests are safe everywhere"})
	add(rules.Rule{ID: "no-curl", Effect: rules.Deny, Tool: "Bash", Args: "curl *", Note: "no network"})
	add(rules.Rule{Effect: rules.Ask, Tool: "*", Agent: "kimi-code", Project: "~/src/infrastructure/production-clusters"})
	for i := 0; i < 3; i++ {
		book.Record(rules.Verdict{Rule: &used, Effect: rules.Allow}, time.Now().Add(-3*time.Minute))
	}
	page, err := fleetpage.New(fleetpage.Config{Token: testToken, LoginsFile: filepath.Join(t.TempDir(), "page-login.key")})
	if err != nil {
		t.Fatal(err)
	}
	srv := relaytest.RunServer(t, relay.Config{Token: testToken, Page: page, Rules: book})
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(srv.URL, testToken)))
	b.WaitJS("the rules view", `document.getElementById('rules-count').textContent === '3'`)
	for _, size := range [][2]int64{{1280, 900}, {360, 740}} {
		b.MustRun("resize", chromedp.EmulateViewport(size[0], size[1]))
		var settled bool
		b.EvalAwait("the layout settles", browsertest.AfterFrames(`true`), &settled)
		var broken []string
		b.Eval("broken words", brokenWords+`('rules-pane')`, &broken)
		if len(broken) > 0 {
			t.Errorf("at %d px the rules view cuts words across lines: %q", size[0], broken)
		}
		var wide bool
		b.Eval("overflow", `document.getElementById('rules-pane').scrollWidth > document.getElementById('rules-pane').clientWidth || document.documentElement.scrollWidth > innerWidth`, &wide)
		if wide {
			t.Errorf("at %d px the rules view is wider than its place", size[0])
		}
		var text string
		b.Eval("the used rule", `document.querySelector('`+sel("data-rule", used.ID)+`').innerText`, &text)
		if !strings.Contains(text, "used 3 times") || !strings.Contains(text, "last 3m ago") {
			t.Errorf("at %d px the rule's uses and last use: %q", size[0], text)
		}
		b.Eval("an unused rule", `document.querySelector('[data-rule="no-curl"]').innerText`, &text)
		if !strings.Contains(text, "never used") {
			t.Errorf("at %d px an unused rule says %q", size[0], text)
		}
	}
}
