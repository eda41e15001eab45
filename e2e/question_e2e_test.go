// AskUserQuestion in a real `kimi web`, answered with `respond`,
// dismissed, or answered in Kimi's own UI, and the audit of all three.

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// TestE2EQuestions: the model calls AskUserQuestion in a real `kimi web`
// session (the "question" scenario: two questions, one multi-select, both
// taking other text) with bridge-web in primary mode, control on, and the
// real relay between. One kimi web, one relay, one bridge, three sessions:
//
//  1. the question shows in pending and is answered once with `aep-kimi
//     respond` (a choice by number, and choices by label with free text
//     for the second question); Kimi continues with it: the mock model's
//     next request carries exactly that answer in the tool result;
//  2. it is dismissed with `respond --option dismiss`; Kimi's tool result
//     says the person dismissed it;
//  3. it is answered in Kimi's own UI (kap's REST, as the UI does): the
//     request is withdrawn (answered via oob with the choice), a late
//     `respond` is refused before sending, and a late command sent anyway
//     is refused by the bridge with the reason.
//
// The audit records all three with who answered, through what.
func TestE2EQuestions(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	// The bridge at capture redacted: a refusal's detail is [redacted]
	// (AEP-0004), and the test reads the reason.
	ws := stacktest.StartWebStackWith(t, kimi, kimiharness.ScenarioFile(t, "question"), nil, "primary", "AEP_KIMI_WEB_CONTROL=1", "AEP_CAPTURE=redacted")
	ask := func(t *testing.T) (string, *aep.Event) {
		t.Helper()
		sid := ws.Web.CreateSession(t)
		ws.Web.Prompt(t, sid, "ask me where to deploy")
		req := ws.WaitFor(t, sid, "the question's request", func(e *aep.Event) bool { return e.Type == "attention.requested" })
		return sid, req
	}
	// toolResult is what the model was told the person answered: the tool
	// message of the session's request after the question.
	toolResult := func(t *testing.T, sid string) string {
		t.Helper()
		var got string
		if !poll.Until(kimiharness.Patience, func() bool {
			got = ""
			for _, body := range ws.Mock.Requests(t) {
				var r struct {
					Key      string `json:"prompt_cache_key"`
					Messages []struct {
						Role    string `json:"role"`
						Content any    `json:"content"`
					} `json:"messages"`
				}
				if json.Unmarshal([]byte(body), &r) != nil || r.Key != sid || len(r.Messages) == 0 {
					continue
				}
				if last := r.Messages[len(r.Messages)-1]; last.Role == "tool" {
					got, _ = last.Content.(string)
				}
			}
			return got != ""
		}) {
			t.Fatalf("the model never got the question's tool result in session %s", sid)
		}
		return got
	}
	outcome := func(t *testing.T, sid, reqID string) (answered, resolved *aep.Event) {
		t.Helper()
		resolved = ws.WaitFor(t, sid, "the request's end", func(e *aep.Event) bool { return e.Type == "attention.resolved" && e.Subject == reqID })
		_, evs := ws.Events(t, sid)
		for _, e := range evs {
			if e.Type == "attention.answered" && e.Subject == reqID {
				answered = e
			}
		}
		if answered == nil {
			t.Fatalf("no attention.answered for %s", reqID)
		}
		return answered, resolved
	}

	// 1. Answered with aep-kimi respond.
	sid, req := ask(t)
	d := stacktest.DataOf(req)
	if d["kind"] != "form" || stacktest.JsonString(d["respond_via"]) != `["control","oob"]` || stacktest.JsonString(d["options"]) != `[{"id":"dismiss","label":"Dismiss"}]` {
		t.Fatalf("request %s", stacktest.JsonString(d))
	}
	fields := stacktest.JsonString(d["fields"])
	for _, want := range []string{`"label":"Deploy where?"`, `"label":"staging"`, `"label":"Notify whom?"`, `"multi":true`, `"other":true`} {
		if !strings.Contains(fields, want) {
			t.Errorf("fields lack %s: %s", want, fields)
		}
	}
	var pending []string
	if !poll.Until(30*time.Second, func() bool {
		var q struct {
			Items []struct {
				QuestionID string `json:"question_id"`
			} `json:"items"`
		}
		ws.Web.Call(t, http.MethodGet, "/api/v1/sessions/"+sid+"/questions?status=pending", nil, &q)
		pending = nil
		for _, it := range q.Items {
			pending = append(pending, it.QuestionID)
		}
		return len(pending) == 1
	}) || pending[0] != req.Subject {
		t.Fatalf("kap-server's pending questions %v, the request's subject %s", pending, req.Subject)
	}
	code, out := ws.Cli(t, "pending")
	for _, want := range []string{"1. Deploy where?: 1 staging · 2 prod · or your own words (--other)", "2. Notify whom? (any of): 1 ops · 2 dev · 3 qa",
		"--choice N ", req.ID} {
		if !strings.Contains(out, want) {
			t.Errorf("pending (exit %d) lacks %q:\n%s", code, want, out)
		}
	}
	code, out = ws.Cli(t, "respond", "--choice", "2", "--question", "2", "--choice", "ops", "--choice", "QA", "--other", "the boss", sid)
	if code != 0 {
		t.Fatalf("respond: exit %d: %s", code, out)
	}
	cmdID := stacktest.CommandID.FindStringSubmatch(out)[1]
	answered, resolved := outcome(t, sid, req.ID)
	ad := stacktest.DataOf(answered)
	if ad["via"] != "control" || ad["by"] != "owner" || ad["x-kimi-code-surface"] != "cli" || answered.Cause != cmdID ||
		stacktest.JsonString(ad["answer"]) != `{"values":{"q_0":"opt_0_1","q_1":["opt_1_0","opt_1_2","the boss"]}}` {
		t.Errorf("answered %s cause %s (command %s)", stacktest.JsonString(ad), answered.Cause, cmdID)
	}
	if stacktest.DataOf(resolved)["resolution"] != "answered" || resolved.Cause != cmdID {
		t.Errorf("resolved %s cause %s", stacktest.JsonString(stacktest.DataOf(resolved)), resolved.Cause)
	}
	if got := toolResult(t, sid); got != `{"answers":{"Deploy where?":"prod","Notify whom?":"ops, qa, the boss"}}` {
		t.Errorf("Kimi continued with %s", got)
	}
	ws.WaitCount(t, sid, "run.finished", 1)

	// 2. Dismissed with aep-kimi respond.
	sid2, req2 := ask(t)
	if code, out := ws.Cli(t, "respond", "--option", "dismiss", sid2); code != 0 {
		t.Fatalf("respond --option dismiss: exit %d: %s", code, out)
	}
	answered2, resolved2 := outcome(t, sid2, req2.ID)
	if d := stacktest.DataOf(answered2); stacktest.JsonString(d["answer"]) != `{"option":"dismiss"}` || d["via"] != "control" || d["by"] != "owner" ||
		stacktest.DataOf(resolved2)["resolution"] != "dismissed" {
		t.Errorf("dismissal %s then %s", stacktest.JsonString(d), stacktest.JsonString(stacktest.DataOf(resolved2)))
	}
	if got := toolResult(t, sid2); !strings.Contains(got, `"answers":{}`) || !strings.Contains(got, "dismissed") {
		t.Errorf("Kimi continued with %s", got)
	}

	// 3. Answered in Kimi's own UI first.
	sid3, req3 := ask(t)
	ws.Web.Call(t, http.MethodPost, "/api/v1/sessions/"+sid3+"/questions/"+req3.Subject,
		map[string]any{"answers": map[string]any{"q_0": map[string]any{"kind": "single", "option_id": "opt_0_0"}}}, nil)
	answered3, resolved3 := outcome(t, sid3, req3.ID)
	if d := stacktest.DataOf(answered3); d["via"] != "oob" || d["by"] != nil || stacktest.JsonString(d["answer"]) != `{"values":{"q_0":"opt_0_0"}}` ||
		stacktest.DataOf(resolved3)["resolution"] != "answered" {
		t.Errorf("withdrawal %s then %s", stacktest.JsonString(d), stacktest.JsonString(stacktest.DataOf(resolved3)))
	}
	if got := toolResult(t, sid3); got != `{"answers":{"Deploy where?":"staging"}}` {
		t.Errorf("Kimi continued with %s", got)
	}
	code, out = ws.Cli(t, "respond", "--choice", "2", sid3, req3.ID)
	if code != stacktest.ExitNotPending || strings.TrimSpace(out) != "aep-kimi respond: request "+req3.ID+" no longer waits (answered): answered in Kimi" {
		t.Errorf("late respond: exit %d: %q", code, out)
	}
	late, err := client.RespondValues(sid3, req3.ID, map[string]any{"q_0": "opt_0_1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := client.SendCommand(ctx, ws.RelayURL, ws.Token, http.DefaultClient, late, 10*time.Second)
	if err != nil || res.Accepted() || res.Reason != "refused" || res.Detail != "the question was already answered in Kimi's own UI" {
		t.Errorf("late command: %+v %v", res, err)
	}

	// On the record.
	code, out = ws.Cli(t, "audit", "--json")
	if code != 0 {
		t.Fatalf("audit: exit %d: %s", code, out)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r consumer.AuditRow
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("audit: %v\n%s", err, out)
		}
		got[r.Request] = r.Words()
	}
	for id, want := range map[string]string{req.ID: "answered by owner from the terminal", req2.ID: "dismissed by owner from the terminal", req3.ID: "answered in Kimi"} {
		if got[id] != want {
			t.Errorf("audit of %s: %q, want %q (all: %v)", id, got[id], want, got)
		}
	}
	for _, s := range []string{sid, sid2, sid3} {
		stacktest.ValidateWithCLI(t, ws.LogPath(s))
	}
}
