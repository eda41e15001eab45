package notify_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/pushtest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/notify/webhook"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/rules"
)

// question raises a Kimi question as bridge-web maps it (docs/questions.md):
// a form of select fields, a request-level dismiss option, answered
// through control or in Kimi.
func (st *stage) question(t *testing.T, session string, fields ...map[string]any) *aep.Event {
	t.Helper()
	var fs []any
	var labels []string
	for _, f := range fields {
		fs = append(fs, f)
		labels = append(labels, f["label"].(string))
	}
	return st.publish(t, session, "attention.requested", "q_kap_1", map[string]any{
		"kind": "form", "prompt": strings.Join(labels, " / "), "fields": fs,
		"options":     []any{map[string]any{"id": "dismiss", "label": "Dismiss"}},
		"respond_via": []any{"control", "oob"},
	}, aep.CaptureRedacted)
}

func selectField(id, label string, multi, other bool, pairs ...string) map[string]any {
	var cs []any
	for i := 0; i+1 < len(pairs); i += 2 {
		cs = append(cs, map[string]any{"id": pairs[i], "label": pairs[i+1]})
	}
	return map[string]any{"id": id, "type": "select", "label": label, "multi": multi, "other": other, "choices": cs}
}

// commandAnswer waits for the answer the emitter gets, and says who sent it.
func commandAnswer(t *testing.T, st *stage) (map[string]any, string) {
	t.Helper()
	select {
	case c := <-st.cmds:
		data, _ := c.DataMap()
		ans, _ := data["answer"].(map[string]any)
		by, _ := c.ExtString(mapping.ExtBy)
		if c.Type != rules.CommandType || c.Agent != mapping.AgentLink {
			t.Fatalf("command %s from %s", c.Type, c.Agent)
		}
		return ans, by
	case <-time.After(2 * time.Second):
		t.Fatal("the held question got no answer")
		return nil, ""
	}
}

// A two-question Kimi form at the targets' metadata ceiling: each format
// offers the first question's choices as answer links (ntfy two of three,
// its third action Open, since the page has the rest; Slack and the
// webhook all three, and Open), each labelled by its place since the
// ceiling withholds the model's words, and says the links answer one
// question of two. A webhook link answers the first question with its
// choice, as the person the link is for; once the question is answered
// another link is refused, saying why, and the used one as used.
func TestFormatsQuestionChoices(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ntfyURL, ntfyGot := localReceiver(t)
	slackURL, slackGot := localReceiver(t)
	hookURL, hookGot := localReceiver(t)
	targets := receiverTargets(t, home, ntfyURL, slackURL, "webhook:"+hookURL+"/in")
	st := newStage(t, notify.Config{Targets: targets, Home: home}, nil)
	st.start(t, "k1")
	req := st.question(t, "k1",
		selectField("q_0", "Deploy where?", false, true, "o1", "staging", "o2", "prod", "o3", "canary"),
		selectField("q_1", "Notify whom?", true, false, "o4", "ops", "o5", "dev"))

	var nm ntfyBody
	if err := json.Unmarshal(firstDelivery(t, "ntfy", ntfyGot, 2*time.Second).body, &nm); err != nil {
		t.Fatal(err)
	}
	var sm slackBody
	if err := json.Unmarshal(firstDelivery(t, "slack", slackGot, 2*time.Second).body, &sm); err != nil {
		t.Fatal(err)
	}
	var wb webhook.Body
	if err := json.Unmarshal(firstDelivery(t, "webhook", hookGot, 2*time.Second).body, &wb); err != nil {
		t.Fatal(err)
	}

	var ntfyLabels []string
	for i, a := range nm.Actions {
		ntfyLabels = append(ntfyLabels, a.Label)
		if i < 2 && (a.Action != "http" || a.Method != http.MethodPost || !strings.HasPrefix(a.URL, st.url+relay.AnswerPath)) {
			t.Errorf("ntfy choice action %+v: want a POST to its answer link", a)
		}
		if i == 2 && (a.Action != "view" || a.URL != nm.Click || !strings.HasPrefix(a.URL, st.url+"/?")) {
			t.Errorf("ntfy open action %+v: want a view of the page at the question", a)
		}
	}
	if !slices.Equal(ntfyLabels, []string{"Choice 1", "Choice 2", "Open"}) {
		t.Errorf("ntfy actions %q, want Choice 1, Choice 2, Open", ntfyLabels)
	}
	if nm.Title != "A question waits for you" || !strings.Contains(nm.Message, "the page has all 2 questions") {
		t.Errorf("ntfy says %q / %q", nm.Title, nm.Message)
	}
	var buttons []string
	for _, b := range sm.Blocks {
		for _, e := range b.Elements {
			if b.Type == "actions" {
				var text struct{ Text string }
				_ = json.Unmarshal(e.Text, &text)
				buttons = append(buttons, text.Text)
			}
		}
	}
	if !slices.Equal(buttons, []string{"Choice 1", "Choice 2", "Choice 3", "Open"}) {
		t.Errorf("slack buttons %q, want the three choices and Open", buttons)
	}
	var opts, labels []string
	for _, a := range wb.Answers {
		opts, labels = append(opts, a.Option), append(labels, a.Label)
	}
	if !slices.Equal(opts, []string{"o1", "o2", "o3"}) || !slices.Equal(labels, []string{"Choice 1", "Choice 2", "Choice 3"}) ||
		wb.Request != req.ID || wb.Tool != "" || !strings.HasPrefix(wb.Open, st.url+"/?") {
		t.Fatalf("webhook body %+v: want the first question's three choices and Open", wb)
	}
	for _, s := range []string{nm.Title, nm.Message, sm.Text, wb.Title, wb.Body} {
		if strings.Contains(s, "staging") || strings.Contains(s, "Deploy where") {
			t.Errorf("a message at the metadata ceiling says the model's words: %q", s)
		}
	}

	// Opening a link (a chat's preview, a browser) answers nothing.
	prod := wb.Answers[1].URL
	if resp, body := get(t, prod); resp.StatusCode != http.StatusOK || !strings.Contains(body, "“Choice 2” to question 1") || !strings.Contains(body, `<form method="post">`) {
		t.Fatalf("GET the link: %d %s", resp.StatusCode, body)
	}
	noCommand(t, st, 300*time.Millisecond)

	// POSTing it answers the first question with that choice.
	if status, js, raw := post(t, prod, nil); status != http.StatusOK || js["answered"] != true || js["option"] != "o2" || js["request"] != req.ID {
		t.Fatalf("POST the link: %d %s", status, raw)
	}
	ans, by := commandAnswer(t, st)
	if want := map[string]any{"values": map[string]any{"q_0": "o2"}}; !reflect.DeepEqual(ans, want) || by != access.OwnerName {
		t.Fatalf("answer %v by %q, want %v by %s", ans, by, want, access.OwnerName)
	}
	// The bridge applies it, as docs/questions.md records it.
	st.publish(t, "k1", "attention.answered", req.ID, map[string]any{
		"answer": ans, "by": access.OwnerName, "via": "control", mapping.DataSurface: "link",
	}, aep.CaptureMetadata)
	st.resolve(t, "k1", req, "answered")
	firstDelivery(t, "ntfy follow-up", ntfyGot, 3*time.Second)

	// The question is over: another choice's link says so; the used one,
	// that it was used.
	status, js, raw := post(t, nm.Actions[0].URL, nil)
	if status != http.StatusGone || js["code"] != notify.CodeAnswerExpired || !strings.Contains(js["detail"].(string), "no longer waits (answered)") {
		t.Errorf("another choice after the answer: %d %s", status, raw)
	}
	if resp, body := get(t, nm.Actions[0].URL); resp.StatusCode != http.StatusGone || !strings.Contains(body, "no longer waits") || strings.Contains(body, "<form") {
		t.Errorf("GET another choice after the answer: %d %s", resp.StatusCode, body)
	}
	if status, js, raw := post(t, prod, nil); status != http.StatusConflict || js["code"] != notify.CodeAnswerUsed {
		t.Errorf("the used link again: %d %s", status, raw)
	}
	noCommand(t, st, 300*time.Millisecond)
}

// A recipient who may read more (the ceiling at redacted) sees the choices'
// own words; a link to a multi-select question answers it with a list of
// its one choice (AEP-0006: an array for multi), and a one-question form
// whose question takes one choice and no free text needs no Open to be
// answered in full.
func TestNotifyQuestionLinkValues(t *testing.T) {
	t.Parallel()
	rec := &recorder{name: "webhook:receiver.test"}
	// A short coalescing window: the third message waits out the window the
	// first opened.
	st := newStage(t, notify.Config{Targets: []notify.Target{rec}, Capture: aep.CaptureRedacted, Window: 300 * time.Millisecond}, nil)
	st.start(t, "k2")
	multi := st.question(t, "k2", selectField("q_0", "Notify whom?", true, false, "o4", "ops", "o5", "dev"))
	m := waitMsgs(t, rec, 1, 2*time.Second)[0]
	var labels []string
	for _, a := range m.Answers {
		labels = append(labels, a.Label)
	}
	if !slices.Equal(labels, []string{"ops", "dev"}) || !m.More || m.Title != "A question waits for you" || m.Body == "" {
		t.Fatalf("message %+v: want ops and dev, and more on the page", m)
	}
	if status, _, raw := post(t, answerURL(t, m, "o5"), nil); status != http.StatusOK {
		t.Fatalf("POST dev: %d %s", status, raw)
	}
	if ans, _ := commandAnswer(t, st); !reflect.DeepEqual(ans, map[string]any{"values": map[string]any{"q_0": []any{"o5"}}}) {
		t.Fatalf("a multi-select's link answered %v, want [o5]", ans)
	}
	st.resolve(t, "k2", multi, "answered")
	waitMsgs(t, rec, 2, 2*time.Second)

	st.question(t, "k2", selectField("q_0", "Continue?", false, false, "y", "Yes", "n", "No"))
	m = waitMsgs(t, rec, 3, 3*time.Second)[2] // after the window a notification holds the next ones
	if m.Kind != notify.KindRequest || len(m.Answers) != 2 || m.More {
		t.Fatalf("one question of one choice: %+v", m)
	}
	if status, _, raw := post(t, answerURL(t, m, "n"), nil); status != http.StatusOK {
		t.Fatalf("POST No: %d %s", status, raw)
	}
	if ans, _ := commandAnswer(t, st); !reflect.DeepEqual(ans, map[string]any{"values": map[string]any{"q_0": "n"}}) {
		t.Fatalf("answered %v", ans)
	}
}

// A question reaches a subscribed phone as a push whose actions are the
// first question's choices (labelled by place at the push's metadata
// ceiling), its open the page; an action answers that question as the
// device's owner, from a phone.
func TestWebPushQuestion(t *testing.T) {
	t.Parallel()
	ps := pushtest.New(t)
	st := newStage(t, notify.Config{PushServiceAllow: ps.Allow()}, nil)
	sub, _ := subscribe(t, st, ps, "Pixel 8")
	st.start(t, "k3")
	req := st.question(t, "k3",
		selectField("q_0", "Deploy where?", false, false, "o1", "staging", "o2", "prod"),
		selectField("q_1", "Notify whom?", true, false, "o4", "ops"))
	m, p := nextPush(t, ps, sub, 0)
	var labels []string
	for _, a := range p.Answers {
		labels = append(labels, a.Label)
	}
	if p.Title != "A question waits for you" || !slices.Equal(labels, []string{"Choice 1", "Choice 2"}) || !strings.HasPrefix(p.Open, st.url+"/?") {
		t.Fatalf("payload %+v", p)
	}
	if strings.Contains(string(m.Plaintext), "staging") || strings.Contains(string(m.Plaintext), "Deploy where") {
		t.Errorf("the push says the model's words at the metadata ceiling: %s", m.Plaintext)
	}
	if code, _, raw := post(t, p.Answers[0].URL, nil); code != http.StatusOK {
		t.Fatalf("the push's first choice: %d %s", code, raw)
	}
	select {
	case c := <-st.cmds:
		data, _ := c.DataMap()
		by, _ := c.ExtString(mapping.ExtBy)
		if want := map[string]any{"values": map[string]any{"q_0": "o1"}}; c.Agent != mapping.AgentPush || c.Subject != req.ID || !reflect.DeepEqual(data["answer"], want) || by != access.OwnerName {
			t.Fatalf("command from %s by %q: %s", c.Agent, by, c.Data)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the question got no answer")
	}
}
