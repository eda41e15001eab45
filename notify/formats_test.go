package notify_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/notify/webhook"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
	"github.com/aep-kimi/aep-kimi/rules"
)

// delivery is one request a local receiver got.
type delivery struct {
	header http.Header
	body   []byte
}

// localReceiver stands in for a service that cannot run here (ntfy.sh,
// Slack, a user's webhook endpoint): it takes every POST and hands it on.
func localReceiver(t *testing.T) (string, <-chan delivery) {
	t.Helper()
	got := make(chan delivery, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{header: r.Header.Clone(), body: b}
	}))
	t.Cleanup(srv.Close)
	return srv.URL, got
}

// receiverTargets parses an ntfy target for topic aepalerts on ntfyURL, a
// Slack target whose URL (a secret) is in a file, and more specs.
func receiverTargets(t *testing.T, home, ntfyURL, slackURL string, more ...string) []notify.Target {
	t.Helper()
	slackFile := filepath.Join(t.TempDir(), "slack-url")
	if err := os.WriteFile(slackFile, []byte(slackURL+"/services/T0/B0/SLACKSECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var targets []notify.Target
	for _, spec := range append([]string{"ntfy:" + ntfyURL + "/aepalerts", "slack:@" + slackFile}, more...) {
		tg, err := notify.ParseTargetIn(spec, home)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, tg)
	}
	return targets
}

func firstDelivery(t *testing.T, name string, got <-chan delivery, within time.Duration) delivery {
	t.Helper()
	select {
	case d := <-got:
		return d
	case <-time.After(within):
		t.Fatalf("%s got nothing within %v", name, within)
		return delivery{}
	}
}

// The three webhook formats behind the real notifier and relay: each
// receiver gets the waiting request within 2 s with its answer links; the
// Slack button's link, opened in a browser (a GET), answers nothing; the
// ntfy action, which POSTs when tapped, answers the held request; the
// webhook body verifies with the secret the relay keeps under its home;
// and the deliveries on the record name the targets without their secrets.
func TestFormatsThroughNotifier(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ntfyURL, ntfyGot := localReceiver(t)
	slackURL, slackGot := localReceiver(t)
	hookURL, hookGot := localReceiver(t)
	targets := receiverTargets(t, home, ntfyURL, slackURL, "webhook:"+hookURL+"/in")
	st := newStage(t, notify.Config{Targets: targets, Home: home}, nil)
	st.start(t, "h1")
	req := st.ask(t, "h1", "rm -rf build", time.Minute)

	var nm struct {
		Topic   string `json:"topic"`
		Click   string `json:"click"`
		Actions []struct{ Action, Label, URL, Method string }
	}
	if err := json.Unmarshal(firstDelivery(t, "ntfy", ntfyGot, 2*time.Second).body, &nm); err != nil {
		t.Fatal(err)
	}
	var sm struct {
		Blocks []struct {
			Type     string
			Elements []struct{ Type, URL string }
		}
	}
	if err := json.Unmarshal(firstDelivery(t, "slack", slackGot, 2*time.Second).body, &sm); err != nil {
		t.Fatal(err)
	}
	hook := firstDelivery(t, "webhook", hookGot, 2*time.Second)
	var wb webhook.Body
	if err := json.Unmarshal(hook.body, &wb); err != nil {
		t.Fatal(err)
	}

	if nm.Topic != "aepalerts" || len(nm.Actions) != 2 || !strings.HasPrefix(nm.Click, st.url) {
		t.Fatalf("ntfy: %+v", nm)
	}
	for _, a := range nm.Actions {
		if a.Action != "http" || a.Method != http.MethodPost || !strings.HasPrefix(a.URL, st.url+relay.AnswerPath) {
			t.Errorf("ntfy action %+v", a)
		}
	}
	if wb.Kind != notify.KindRequest || wb.Session != "h1" || wb.Request != req.ID || wb.Tool != "Bash" || wb.Deadline == nil || len(wb.Answers) != 2 {
		t.Errorf("webhook body %+v", wb)
	}
	secret, err := os.ReadFile(filepath.Join(home, notify.WebhookSecretName))
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.VerifySignature([]byte(strings.TrimSpace(string(secret))), hook.header.Get(webhook.SignatureHeader), hook.body, time.Now(), 0); err != nil {
		t.Errorf("webhook signature: %v", err)
	}

	// A chat's link button opens the link: the confirmation page, no answer.
	var slackAllow string
	for _, b := range sm.Blocks {
		for _, e := range b.Elements {
			if b.Type == "actions" && e.Type == "button" && slackAllow == "" {
				slackAllow = e.URL
			}
		}
	}
	if !strings.HasPrefix(slackAllow, st.url+relay.AnswerPath) {
		t.Fatalf("slack: no answer button in %+v", sm)
	}
	if resp, body := get(t, slackAllow); resp.StatusCode != http.StatusOK || !strings.Contains(body, `<form method="post">`) {
		t.Fatalf("GET the Slack button's link: %d %s", resp.StatusCode, body)
	}
	noCommand(t, st, 300*time.Millisecond)

	// ntfy's http action POSTs: that answers.
	var deny string
	for _, a := range nm.Actions {
		if a.Label == "Deny" {
			deny = a.URL
		}
	}
	if status, js, raw := post(t, deny, nil); status != http.StatusOK || js["option"] != "deny" {
		t.Fatalf("POST the ntfy action: %d %s", status, raw)
	}
	select {
	case c := <-st.cmds:
		data, _ := c.DataMap()
		ans, _ := data["answer"].(map[string]any)
		if c.Type != rules.CommandType || c.Subject != req.ID || ans["option"] != "deny" || c.Agent != mapping.AgentLink {
			t.Fatalf("command %s %s from %s", c.Type, c.Data, c.Agent)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the held request got no answer")
	}

	// Each delivery is on the record, naming its target without secrets.
	var routed []string
	poll.Until(2*time.Second, func() bool {
		routed = nil
		for _, ev := range readSession(t, st, "h1", "attention.routed") {
			d, _ := ev.DataMap()
			to, _ := d["to"].(string)
			routed = append(routed, to)
		}
		return len(routed) >= 3
	})
	if len(routed) != 3 {
		t.Fatalf("attention.routed to %v, want the 3 targets", routed)
	}
	for _, to := range routed {
		if strings.Contains(to, "SLACKSECRET") || strings.Contains(to, "aepalerts") {
			t.Errorf("attention.routed names %q", to)
		}
	}
}

// ntfyBody is ntfy's JSON publish format, the fields it documents for a
// message with action buttons.
type ntfyBody struct {
	Topic    string   `json:"topic"`
	Title    string   `json:"title"`
	Message  string   `json:"message"`
	Tags     []string `json:"tags"`
	Priority int      `json:"priority"`
	Click    string   `json:"click"`
	Actions  []struct {
		Action, Label, URL, Method string
		Clear                      bool
	} `json:"actions"`
}

// slackBody is a Slack incoming-webhook message with Block Kit blocks.
type slackBody struct {
	Text   string `json:"text"`
	Blocks []struct {
		Type     string
		Elements []struct {
			Type     string
			Text     json.RawMessage // a text object on a button, a string on a context's text
			URL      string
			ActionID string `json:"action_id"`
			Style    string
		}
	}
}

// A gate's four options (Allow, Allow session, Deny, Cancel) on a phone:
// ntfy, which shows three actions, gets Allow and Deny, each POSTing its
// answer link, and Open; Slack gets link buttons for every answer, Deny in
// Block Kit's danger style, and Open. Denying from ntfy answers the held
// request, and the follow-ups say so in words, with no check mark.
func TestFormatsGateAllowDenyOpen(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	ntfyURL, ntfyGot := localReceiver(t)
	slackURL, slackGot := localReceiver(t)
	targets := receiverTargets(t, home, ntfyURL, slackURL)
	st := newStage(t, notify.Config{Targets: targets, Home: home}, nil)
	st.start(t, "g1")
	req := st.publish(t, "g1", "attention.requested", "Bash", map[string]any{
		"kind": "permission", "prompt": "Kimi wants to use Bash: rm -rf build",
		"options": []any{map[string]any{"id": "allow", "label": "Allow"}, map[string]any{"id": "allow_session", "label": "Allow for this session"},
			map[string]any{"id": "deny", "label": "Deny"}, map[string]any{"id": "cancel", "label": "Cancel"}},
		"respond_via": []any{"control"}, "expires_at": aep.FormatTime(time.Now().Add(time.Minute)), mapping.DataOnExpiry: mapping.OnExpiryAllow,
		"tool": map[string]any{"name": "Bash"},
	}, aep.CaptureRedacted)

	var nm ntfyBody
	if err := json.Unmarshal(firstDelivery(t, "ntfy", ntfyGot, 2*time.Second).body, &nm); err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, a := range nm.Actions {
		labels = append(labels, a.Label)
	}
	if !slices.Equal(labels, []string{"Allow", "Deny", "Open"}) {
		t.Fatalf("ntfy actions %q, want Allow, Deny, Open", labels)
	}
	deny := ""
	for i, a := range nm.Actions {
		switch {
		case i < 2 && (a.Action != "http" || a.Method != http.MethodPost || !a.Clear || !strings.HasPrefix(a.URL, st.url+relay.AnswerPath)):
			t.Errorf("ntfy answer action %+v: want an http POST to its answer link that clears", a)
		case i == 2 && (a.Action != "view" || a.URL != nm.Click || !strings.HasPrefix(a.URL, st.url+"/?")):
			t.Errorf("ntfy open action %+v: want a view of the page at the request", a)
		}
		if a.Label == "Deny" {
			deny = a.URL
		}
	}

	var sm slackBody
	if err := json.Unmarshal(firstDelivery(t, "slack", slackGot, 2*time.Second).body, &sm); err != nil {
		t.Fatal(err)
	}
	var buttons []string
	for _, b := range sm.Blocks {
		if b.Type != "actions" {
			continue
		}
		if len(b.Elements) > 25 {
			t.Errorf("slack actions block with %d elements (at most 25)", len(b.Elements))
		}
		for _, e := range b.Elements {
			var text struct{ Type, Text string }
			if err := json.Unmarshal(e.Text, &text); err != nil || e.Type != "button" || text.Type != "plain_text" || e.URL == "" || e.ActionID == "" || len(text.Text) > 75 {
				t.Errorf("slack button %+v", e)
			}
			if e.Style != "" && e.Style != "primary" && e.Style != "danger" {
				t.Errorf("slack button style %q", e.Style)
			}
			if (e.Style == "danger") != (text.Text == "Deny") {
				t.Errorf("slack button %q has style %q", text.Text, e.Style)
			}
			buttons = append(buttons, text.Text)
		}
	}
	if !slices.Contains(buttons, "Allow") || !slices.Contains(buttons, "Deny") || !slices.Contains(buttons, "Open") {
		t.Fatalf("slack buttons %q, want Allow, Deny and Open among them", buttons)
	}

	// Deny from the phone: the ntfy action POSTs.
	if status, js, raw := post(t, deny, nil); status != http.StatusOK || js["option"] != "deny" {
		t.Fatalf("POST the ntfy Deny: %d %s", status, raw)
	}
	select {
	case <-st.cmds:
	case <-time.After(2 * time.Second):
		t.Fatal("the held request got no answer")
	}
	// The emitter applies it, as the gate does.
	st.publish(t, "g1", "attention.answered", req.ID, map[string]any{
		"answer": map[string]any{"option": "deny"}, "by": access.OwnerName, "via": "control", mapping.DataSurface: consumer.SurfaceLink,
	}, aep.CaptureMetadata)
	st.resolve(t, "g1", req, "answered")

	var nu ntfyBody
	if err := json.Unmarshal(firstDelivery(t, "ntfy follow-up", ntfyGot, 3*time.Second).body, &nu); err != nil {
		t.Fatal(err)
	}
	const words = "Denied by owner through an answer link"
	if nu.Title != words || len(nu.Actions) != 0 || slices.Contains(nu.Tags, "white_check_mark") || !strings.Contains(nu.Message, "Bash") {
		t.Errorf("ntfy follow-up %+v: want %q, no buttons, no check mark", nu, words)
	}
	var su slackBody
	if err := json.Unmarshal(firstDelivery(t, "slack follow-up", slackGot, 3*time.Second).body, &su); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(su.Text, words) {
		t.Errorf("slack follow-up %q, want it to say %q", su.Text, words)
	}
}
