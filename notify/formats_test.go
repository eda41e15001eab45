package notify_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/relay"
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
	home := t.TempDir()
	ntfyURL, ntfyGot := localReceiver(t)
	slackURL, slackGot := localReceiver(t)
	hookURL, hookGot := localReceiver(t)
	slackFile := filepath.Join(t.TempDir(), "slack-url")
	if err := os.WriteFile(slackFile, []byte(slackURL+"/services/T0/B0/SLACKSECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var targets []notify.Target
	for _, spec := range []string{"ntfy:" + ntfyURL + "/aepalerts", "slack:@" + slackFile, "webhook:" + hookURL + "/in"} {
		tg, err := notify.ParseTargetIn(spec, home)
		if err != nil {
			t.Fatal(err)
		}
		targets = append(targets, tg)
	}
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
	var wb notify.WebhookBody
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
	if err := notify.VerifySignature([]byte(strings.TrimSpace(string(secret))), hook.header.Get(notify.SignatureHeader), hook.body, time.Now(), 0); err != nil {
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
	for range 20 {
		routed = nil
		for _, ev := range readSession(t, st, "h1", "attention.routed") {
			d, _ := ev.DataMap()
			to, _ := d["to"].(string)
			routed = append(routed, to)
		}
		if len(routed) >= 3 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(routed) != 3 {
		t.Fatalf("attention.routed to %v, want the 3 targets", routed)
	}
	for _, to := range routed {
		if strings.Contains(to, "SLACKSECRET") || strings.Contains(to, "aepalerts") {
			t.Errorf("attention.routed names %q", to)
		}
	}
}
