package client

import (
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

func TestCommandBuilders(t *testing.T) {
	r, err := Respond("s1", "req-1", "deny", "")
	if err != nil || r.Type != TypeRespond || r.Subject != "req-1" || r.Cause != "req-1" || r.Capture != "" || r.Session != "s1" {
		t.Fatalf("Respond: %+v %v", r, err)
	}
	if d, _ := r.DataMap(); d["answer"].(map[string]any)["option"] != "deny" {
		t.Fatalf("Respond data %s", r.Data)
	}
	if r, _ := Respond("s1", "req-1", "", "because"); r.Capture != aep.CaptureRedacted.String() {
		t.Fatalf("Respond with text: capture %q", r.Capture)
	}
	if _, err := Respond("s1", "req-1", "", ""); err == nil {
		t.Fatal("an empty answer was built")
	}
	c, err := Cancel("s1", "r9", ScopeRun, "")
	if err != nil || c.Type != TypeCancel || c.Run != "r9" || c.Capture != "" {
		t.Fatalf("Cancel: %+v %v", c, err)
	}
	if c, _ := Cancel("s1", "", ScopeSession, "stop"); c.Capture != aep.CaptureRedacted.String() {
		t.Fatalf("Cancel with a reason: capture %q", c.Capture)
	}
	if _, err := Cancel("s1", "", "everything", ""); err == nil || !strings.Contains(err.Error(), "--scope") {
		t.Fatalf("a bad scope: %v", err)
	}
	i, err := Instruct("s1", "use tabs")
	if err != nil || i.Type != TypeInstruct || i.Capture != aep.CaptureRedacted.String() {
		t.Fatalf("Instruct: %+v %v", i, err)
	}
	if _, err := Instruct("s1", " \n"); err == nil {
		t.Fatal("an empty instruction was built")
	}
	for _, e := range []*aep.Event{r, c, i} {
		if err := aep.Validate(e); err != nil {
			t.Errorf("%s: %v", e.Type, err)
		}
	}
}

func TestRejection(t *testing.T) {
	if got := (SendResult{Refused: true, Reason: "no-route"}).Rejection(); got != "rejected by the relay: no-route" {
		t.Error(got)
	}
	if got := (SendResult{Reason: "invalid", Detail: "no such option"}).Rejection(); got != "rejected by the target: invalid: no such option" {
		t.Error(got)
	}
}
