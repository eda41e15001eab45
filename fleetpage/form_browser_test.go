package fleetpage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/fleetpage"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// hostile is question text an agent (a model, through it) may write: markup
// that would run if the page parsed it, a terminal escape and a bidi
// override that reorders what follows it; hostileChoice a choice's label
// alike.
const (
	hostile       = `Deploy <img src=x onerror="window.__pwned=1"><b>where</b>?` + "\x1b[2K \u202eevil"
	hostileChoice = "staging <script>window.__pwned=2</script>\a\u2066"
)

// question is a Kimi question as bridge-web maps it (docs/questions.md): a
// form of select fields, a request-level dismiss option, and respond_via.
func question(id string, fields []any, via ...any) map[string]any {
	d := map[string]any{"kind": "form", "fields": fields, "respond_via": via}
	var labels []string
	for _, f := range fields {
		labels = append(labels, f.(map[string]any)["label"].(string))
	}
	d["prompt"] = strings.Join(labels, " / ")
	if len(via) > 0 && via[0] == "control" {
		d["options"] = []any{map[string]any{"id": "dismiss", "label": "Dismiss"}}
	}
	return map[string]any{"id": id, "subject": "q_" + id[len(id)-4:], "capture": "redacted", "severity": "notice", "data": d}
}

func choices(pairs ...string) []any {
	var out []any
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, map[string]any{"id": pairs[i], "label": pairs[i+1]})
	}
	return out
}

// twoQuestions is the form the tests answer: a single-choice question
// with free text allowed, and a multi-select one.
func twoQuestions(label, first string) []any {
	return []any{
		map[string]any{"id": "q_0", "type": "select", "label": label, "other": true,
			"choices": choices("o1", first, "o2", "prod")},
		map[string]any{"id": "q_1", "type": "select", "label": "Notify whom?", "multi": true,
			"choices": choices("o3", "ops", "o4", "dev", "o5", "nobody")},
	}
}

// envShots names a directory the page's screenshots go to (docs/screenshots
// keeps them); unset, none are taken.
const envShots = "AEP_SHOTS"

// shootPage writes the page, from its top, at a desktop's and a phone's
// width in both schemes, to $AEP_SHOTS as NAME-WIDTH-SCHEME.png.
func shootPage(t *testing.T, b *browsertest.Browser, name string) {
	dir := os.Getenv(envShots)
	if dir == "" {
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		w, h   int64
		scheme string
	}{{1280, 900, "light"}, {1280, 900, "dark"}, {360, 740, "light"}, {360, 740, "dark"}} {
		var png []byte
		b.MustRun("screenshot", chromedp.EmulateViewport(s.w, s.h),
			emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: s.scheme}}),
			chromedp.Evaluate(`scrollTo(0, 0)`, nil),
			chromedp.CaptureScreenshot(&png))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d-%s.png", name, s.w, s.scheme)), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b.MustRun("back to the desktop", chromedp.EmulateViewport(1280, 900))
}

// In Chromium against a real relay: a two-question Kimi form is answered
// from the page (free text for one question, two choices of a multi-select
// one), the picks survive a redraw, the answer reaches the emitter and the
// relay's record as AEP-0006 values from the person logged in, and the
// settled form leaves its trace. Markup and control characters in the
// questions stay text. A form answered only in Kimi shows its questions
// and no controls; one answered in Kimi while the page showed it goes with
// "in Kimi"; Dismiss sends the request's dismiss option, and the dismissed
// form goes saying who dismissed it.
func TestBrowserForm(t *testing.T) {
	b := browsertest.New(t, 1280, 900)
	rl := newRestartableRelay(t)
	em := dialEmitter(t, rl.base())
	two, oob, one, bad := aep.NewID(), aep.NewID(), aep.NewID(), aep.NewID()
	em.send(
		em.event("s1", "session.started", 0, map[string]any{"data": map[string]any{"label": "ship the release"}}),
		em.event("s1", "run.started", -1, map[string]any{"run": "r1"}),
		em.event("s1", "attention.requested", -1, merge(question(two, twoQuestions("Deploy where?", "staging"), "control", "oob"), map[string]any{"run": "r1"})),
	)
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(rl.base(), testToken)))
	item := sel("data-attention", two)
	b.WaitJS("the form, its roster read", `document.querySelector('`+item+`[data-reach="ok"] [data-form-send]') !== null`)
	var kinds []string
	b.Eval("input kinds", `[...document.querySelectorAll('`+item+` input[data-choice]')].map(i => i.closest('fieldset').dataset.field + ':' + i.type)`, &kinds)
	if want := []string{"q_0:radio", "q_0:radio", "q_1:checkbox", "q_1:checkbox", "q_1:checkbox"}; !reflect.DeepEqual(kinds, want) {
		t.Errorf("choices as %v, want %v", kinds, want)
	}

	// Nothing picked: nothing sent, and the page says why, until a pick.
	b.Click("send nothing", item+" [data-form-send]")
	b.WaitJS("why not", `(document.querySelector('`+item+` [data-note]')||{}).textContent?.startsWith('not sent: choose an answer')`)

	// A number key sends nothing on a form of several questions (were it
	// Dismiss, the emitter's next command below would be that).
	b.MustRun("press 1 on the card", chromedp.Evaluate(`document.querySelector('`+item+`').focus()`, nil), chromedp.KeyEvent("1"))

	// Pick: two of q_1's, and free text for q_0 (which unpicks a choice).
	b.Click("pick prod", item+` [data-field="q_0"] [data-choice="o2"]`)
	b.WaitJS("the refusal goes with a pick", `document.querySelector('`+item+` [data-note]') === null`)
	b.Click("pick ops", item+` [data-field="q_1"] [data-choice="o3"]`)
	b.Click("pick dev", item+` [data-field="q_1"] [data-choice="o4"]`)
	b.Click("pick nobody", item+` [data-field="q_1"] [data-choice="o5"]`)
	b.Click("unpick nobody", item+` [data-field="q_1"] [data-choice="o5"]`)
	b.MustRun("type my own answer", chromedp.SendKeys(item+` [data-other-text="q_0"]`, "blue-gree", chromedp.ByQuery))
	// A redraw of the card while I type (it was sent to a phone) keeps the
	// picks, and the field I type in.
	b.MustRun("mark the card", chromedp.Evaluate(`window.__card = document.querySelector('`+item+`')`, nil))
	routed := em.event("s1", "attention.routed", -1, map[string]any{
		"source": "aep://test/agent/aep-kimi-notify", "agent": "aep-kimi-notify", "subject": two, "cause": two,
		"data": map[string]any{"to": "push:alice's Pixel 8", "via": "push"},
	})
	delete(routed, "seq")
	delete(routed, "epoch")
	em.send(routed)
	b.WaitJS("redrawn", `document.querySelector('`+item+` [data-sent]') !== null && document.querySelector('`+item+`') !== window.__card`)
	b.MustRun("type on", chromedp.KeyEvent("n"))
	var kept string
	b.Eval("the picks after the redraw", `[...document.querySelectorAll('`+item+` input:checked')].map(i => i.dataset.choice || 'other').join() + '|' + document.querySelector('`+item+` [data-other-text]').value`, &kept)
	if kept != "other,o3,o4|blue-green" {
		t.Errorf("after a redraw the picks are %q, want other,o3,o4|blue-green", kept)
	}
	shootPage(t, b, "question")

	b.Click("send the answers", item+" [data-form-send]")
	cmd := em.command()
	ans, _ := cmd["data"].(map[string]any)["answer"].(map[string]any)
	want := map[string]any{"q_0": "blue-green", "q_1": []any{"o3", "o4"}}
	if cmd["type"] != "control.attention.respond" || cmd["subject"] != two || !reflect.DeepEqual(ans, map[string]any{"values": want}) {
		t.Fatalf("command %v, want values %v", cmd, want)
	}
	if cmd["capture"] != "redacted" {
		t.Errorf("an answer with free text went at capture %v, want redacted", cmd["capture"])
	}
	// The relay's record: the same values, from the person logged in.
	rec := relaycall.History(t, rl.base(), testToken, "s1", "control.attention.respond", browsertest.Wait)
	if len(rec) != 1 {
		t.Fatalf("the relay recorded %d answers, want 1", len(rec))
	}
	d, _ := rec[0].DataMap()
	by, _ := rec[0].ExtString(mapping.ExtBy)
	if got, _ := d["answer"].(map[string]any); !reflect.DeepEqual(got, map[string]any{"values": want}) || by != access.OwnerName || rec[0].ID != cmd["id"] {
		t.Errorf("recorded %s by %q, want the values by %s", rec[0].Data, by, access.OwnerName)
	}
	// The emitter applies it: the form goes, and says who answered.
	em.send(
		em.event("s1", "control.accepted", -1, map[string]any{"cause": cmd["id"]}),
		em.event("s1", "attention.answered", -1, map[string]any{"subject": two, "cause": cmd["id"], "capture": "redacted",
			"data": map[string]any{"answer": ans, "via": "control", "by": access.OwnerName}}),
		em.event("s1", "attention.resolved", -1, map[string]any{"subject": two, "data": map[string]any{"resolution": "answered"}}),
	)
	b.WaitJS("the form goes with who answered", `document.querySelector('`+item+`') === null && (document.querySelector('`+sel("data-answered", two)+`')||{}).textContent?.startsWith('Answered by owner from the page')`)

	// More forms: one answered only in Kimi, one of a single question, and
	// one whose question text is hostile.
	em.send(
		em.event("s2", "session.started", 0, nil),
		em.event("s2", "attention.requested", -1, question(oob, twoQuestions("Which database?", hostileChoice), "oob")),
		em.event("s3", "session.started", 0, nil),
		em.event("s3", "attention.requested", -1, question(one, []any{
			map[string]any{"id": "q_0", "type": "select", "label": "Continue?", "choices": choices("y", "Yes", "n", "No")}}, "control", "oob")),
		em.event("s4", "session.started", 0, nil),
		em.event("s4", "attention.requested", -1, question(bad, twoQuestions(hostile, hostileChoice), "control", "oob")),
	)

	// Inert: the markup is text, nothing ran, the controls are shown
	// escaped, in a form to answer and in one only read.
	badItem, oobItem := sel("data-attention", bad), sel("data-attention", oob)
	b.WaitJS("the hostile form", `document.querySelector('`+badItem+`[data-reach="ok"] [data-form-send]') !== null`)
	var legend, choiceLabel, listed string
	var markup int
	b.Eval("the first question", `document.querySelector('`+badItem+` [data-field="q_0"] legend').textContent`, &legend)
	b.Eval("a choice", `document.querySelector('`+badItem+` [data-field="q_0"] [data-choice="o1"]').parentElement.textContent`, &choiceLabel)
	b.Eval("an oob question", `document.querySelector('`+oobItem+` .questions [data-field="q_0"]').textContent`, &listed)
	b.Eval("elements from the questions' text", `document.querySelectorAll('#inbox img, #inbox script, #inbox b').length`, &markup)
	if want := `Deploy <img src=x onerror="window.__pwned=1"><b>where</b>?\x1b[2K \u202eevil`; legend != want {
		t.Errorf("question shown as %q, want the text %q", legend, want)
	}
	if want := `staging <script>window.__pwned=2</script>\x07\u2066`; choiceLabel != want {
		t.Errorf("choice shown as %q, want %q", choiceLabel, want)
	}
	if want := `Which database?: staging <script>window.__pwned=2</script>\x07\u2066 / prod / your own words`; listed != want {
		t.Errorf("oob question shown as %q, want %q", listed, want)
	}
	if markup != 0 {
		t.Errorf("%d elements made from the questions' text", markup)
	}
	var pwned any
	b.Eval("nothing ran", `window.__pwned ?? null`, &pwned)
	if pwned != nil {
		t.Fatalf("the question's markup ran: __pwned=%v", pwned)
	}

	// Answered in Kimi only: its questions, no controls.
	var oobControls int
	var oobText string
	b.Eval("oob controls", `document.querySelectorAll('`+oobItem+` button, `+oobItem+` input').length`, &oobControls)
	b.Eval("oob text", `document.querySelector('`+oobItem+`').textContent`, &oobText)
	if oobControls != 0 || !strings.Contains(oobText, "Answer in Kimi") || !strings.Contains(oobText, "Notify whom?: ops / dev / nobody") {
		t.Errorf("an oob form must be information only with its questions: %d controls, text %q", oobControls, oobText)
	}

	// One question: its choices are buttons, the number keys press them;
	// Dismiss sends the request's dismiss option.
	oneItem := sel("data-attention", one)
	b.WaitJS("one tap per choice", `[...document.querySelectorAll('`+oneItem+`[data-reach="ok"] button[data-choice]')].map(b => b.textContent).join() === 'Yes,No'`)
	b.MustRun("press 2 on the card", chromedp.Evaluate(`document.querySelector('`+oneItem+`').focus()`, nil), chromedp.KeyEvent("2"))
	kcmd := em.command()
	if kans, _ := kcmd["data"].(map[string]any)["answer"].(map[string]any); kcmd["subject"] != one || !reflect.DeepEqual(kans, map[string]any{"values": map[string]any{"q_0": "n"}}) {
		t.Fatalf("key 2 sent %v, want the second choice", kcmd)
	}
	b.Click("dismiss", oneItem+` [data-option="dismiss"]`)
	dcmd := em.command()
	if dans, _ := dcmd["data"].(map[string]any)["answer"].(map[string]any); dcmd["subject"] != one || !reflect.DeepEqual(dans, map[string]any{"option": "dismiss"}) {
		t.Fatalf("dismiss sent %v", dcmd)
	}
	// Kimi's own UI answered first (the bridge refuses ours): the form
	// goes, saying so.
	em.send(
		em.event("s3", "control.rejected", -1, map[string]any{"cause": dcmd["id"], "data": map[string]any{"reason": "invalid", "detail": "the question was already answered (in Kimi's own UI)"}}),
		em.event("s3", "attention.answered", -1, map[string]any{"subject": one, "data": map[string]any{"answer": map[string]any{"values": map[string]any{"q_0": "y"}}, "via": "oob"}}),
		em.event("s3", "attention.resolved", -1, map[string]any{"subject": one, "data": map[string]any{"resolution": "answered"}}),
	)
	b.WaitJS("the form goes: answered in Kimi", `document.querySelector('`+oneItem+`') === null && (document.querySelector('`+sel("data-answered", one)+`')||{}).textContent?.startsWith('Answered in Kimi')`)

	// Dismissed from the page: the form goes, saying who dismissed it.
	b.Click("dismiss the hostile form", badItem+` [data-option="dismiss"]`)
	bcmd := em.command()
	em.send(
		em.event("s4", "control.accepted", -1, map[string]any{"cause": bcmd["id"]}),
		em.event("s4", "attention.answered", -1, map[string]any{"subject": bad, "cause": bcmd["id"],
			"data": map[string]any{"answer": map[string]any{"option": "dismiss"}, "via": "control", "by": access.OwnerName}}),
		em.event("s4", "attention.resolved", -1, map[string]any{"subject": bad, "data": map[string]any{"resolution": "dismissed"}}),
	)
	b.WaitJS("the form goes: dismissed", `document.querySelector('`+badItem+`') === null && (document.querySelector('`+sel("data-answered", bad)+`')||{}).textContent?.startsWith('Dismissed by owner from the page')`)

	// A phone's width: the oob form's questions fit.
	b.MustRun("phone width", chromedp.EmulateViewport(360, 740))
	var overflow bool
	b.Eval("overflow", `document.documentElement.scrollWidth > window.innerWidth`, &overflow)
	if overflow {
		t.Error("at 360 px the page scrolls sideways")
	}
}

// A session that begins with no session.* event (a kimi web session the
// bridge first sees as its vendor "session created") and asks a question
// while the page is open: the page learns from the relay that the session
// has a claimant, so the question is a form to answer, not "Not reachable".
func TestBrowserFormNewSessionReachable(t *testing.T) {
	b := browsertest.New(t, 1280, 900)
	rl := newRestartableRelay(t)
	em := dialEmitter(t, rl.base())
	b.MustRun("log in", chromedp.Navigate(fleetpage.LoginURL(rl.base(), testToken)))
	b.WaitJS("the page is live", `document.getElementById('conn').dataset.conn === 'live'`)
	id := aep.NewID()
	em.send(
		em.event("w1", "x.kimi-code.web.event.session.created", 0, nil),
		em.event("w1", "run.started", -1, map[string]any{"run": "r1"}),
		em.event("w1", "attention.requested", -1, merge(question(id, twoQuestions("Deploy where?", "staging"), "control", "oob"), map[string]any{"run": "r1"})),
	)
	item := sel("data-attention", id)
	b.WaitJS("the form, its session reachable", `document.querySelector('`+item+`[data-reach="ok"] [data-form-send]') !== null`)
}
