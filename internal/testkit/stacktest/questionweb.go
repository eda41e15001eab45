package stacktest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// WaitQuestion waits for the n-th question's request in the bridge's log,
// as a form answerable through control, and returns it with the number of
// model requests made by then (the one after them carries the answer).
func (ws *WebStack) WaitQuestion(t *testing.T, sid string, mock *kimiharness.Mock, n int) (*aep.Event, int) {
	t.Helper()
	evs := ws.WaitCount(t, sid, "attention.requested", n)
	var reqs []*aep.Event
	for _, e := range evs {
		if e.Type == "attention.requested" {
			reqs = append(reqs, e)
		}
	}
	req := reqs[n-1]
	d := DataOf(req)
	if d["kind"] != "form" || !strings.Contains(fmt.Sprint(d["respond_via"]), "control") {
		t.Fatalf("the question's request is not a form answered through control: %s", req.Data)
	}
	return req, len(mock.Requests(t))
}

// FormChoice is the first field of a form request and the id of its i-th
// choice, in Kimi's order.
func FormChoice(t *testing.T, req *aep.Event, i int) (field, choice string) {
	t.Helper()
	var d struct {
		Fields []struct {
			ID      string `json:"id"`
			Choices []struct {
				ID string `json:"id"`
			} `json:"choices"`
		} `json:"fields"`
	}
	if err := json.Unmarshal(req.Data, &d); err != nil || len(d.Fields) == 0 || len(d.Fields[0].Choices) <= i {
		t.Fatalf("form request %s: %v", req.Data, err)
	}
	return d.Fields[0].ID, d.Fields[0].Choices[i].ID
}

// ToolResult waits for the model request after the first `after` and checks
// it carries AskUserQuestion's result, its last tool message: question
// answered with label.
func ToolResult(t *testing.T, mock *kimiharness.Mock, after int, question, label string) {
	t.Helper()
	var reqs []string
	if !poll.Until(kimiharness.Patience, func() bool { reqs = mock.Requests(t); return len(reqs) > after }) {
		t.Fatalf("Kimi never asked the model again after the question %q", question)
	}
	var body struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal([]byte(reqs[after]), &body); err != nil {
		t.Fatal(err)
	}
	for i := len(body.Messages) - 1; i >= 0; i-- {
		m := body.Messages[i]
		if m.Role != "tool" {
			continue
		}
		var text string
		if json.Unmarshal(m.Content, &text) != nil {
			text = string(m.Content)
		}
		var res struct {
			Answers map[string]string `json:"answers"`
		}
		if err := json.Unmarshal([]byte(text), &res); err != nil || res.Answers[question] != label {
			t.Fatalf("the model's next request carries the question's result %s, want %q answered %q", text, question, label)
		}
		return
	}
	t.Fatalf("the model's next request has no tool result:\n%s", reqs[after])
}
