package bridgeweb

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/emittertest"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// askedPayload is what kap-server 2.1.0 sends when the model calls
// AskUserQuestion with two questions (every question allows other text).
func askedPayload() map[string]any {
	var pl map[string]any
	json.Unmarshal([]byte(`{"question_id":"question_1","session_id":"s1","turn_id":0,"tool_call_id":"call_1","agent_id":"main","created_at":"2026-11-30T11:00:00.000Z","questions":[`+ //nolint:errcheck // constant
		`{"id":"q_0","question":"Deploy where?","header":"Env","allow_other":true,"options":[{"id":"opt_0_0","label":"staging","description":"safe"},{"id":"opt_0_1","label":"prod"}]},`+
		`{"id":"q_1","question":"Notify whom?","multi_select":true,"allow_other":true,"options":[{"id":"opt_1_0","label":"ops"},{"id":"opt_1_1","label":"dev"}]}]}`), &pl)
	return pl
}

func askedQuestions() []mapping.Question { return mapping.WebQuestions(askedPayload()) }

func TestReadQuestionAnswer(t *testing.T) {
	t.Parallel()
	one := askedQuestions()[:1]
	closed := []mapping.Question{{ID: "q", Choices: []mapping.Choice{{ID: "a", Label: "Yes"}, {ID: "b", Label: "No"}}}}
	cases := []struct {
		name   string
		qs     []mapping.Question
		answer string
		kap    string // the answers posted, or the error
		values string
	}{
		{"choice ids", nil, `{"values":{"q_0":"opt_0_1","q_1":["opt_1_0","opt_1_1"]}}`,
			`{"q_0":{"kind":"single","option_id":"opt_0_1"},"q_1":{"kind":"multi","option_ids":["opt_1_0","opt_1_1"]}}`,
			`{"q_0":"opt_0_1","q_1":["opt_1_0","opt_1_1"]}`},
		{"labels, any case, a repeat", nil, `{"values":{"q_0":" Staging","q_1":["DEV","dev"]}}`,
			`{"q_0":{"kind":"single","option_id":"opt_0_0"},"q_1":{"kind":"multi","option_ids":["opt_1_1"]}}`,
			`{"q_0":"opt_0_0","q_1":["opt_1_1"]}`},
		{"one question left out is skipped", nil, `{"values":{"q_1":"ops"}}`,
			`{"q_1":{"kind":"multi","option_ids":["opt_1_0"]}}`, `{"q_1":["opt_1_0"]}`},
		{"free text", nil, `{"values":{"q_0":" blue-green ","q_1":["ops","the boss"]}}`,
			`{"q_0":{"kind":"other","text":"blue-green"},"q_1":{"kind":"multi_with_other","option_ids":["opt_1_0"],"other_text":"the boss"}}`,
			`{"q_0":"blue-green","q_1":["opt_1_0","the boss"]}`},
		{"only free text on a multi-select question", nil, `{"values":{"q_1":["the boss"]}}`,
			`{"q_1":{"kind":"other","text":"the boss"}}`, `{"q_1":["the boss"]}`},
		{"text alone on a one-question form", one, `{"text":"prod"}`,
			`{"q_0":{"kind":"single","option_id":"opt_0_1"}}`, `{"q_0":"opt_0_1"}`},
		{"dismiss", nil, `{"option":"Dismiss"}`, "dismiss", ""},
		{"text naming dismiss", one, `{"text":" dismiss "}`, "dismiss", ""},

		{"text on a two-question form", nil, `{"text":"prod"}`, "error: this form asks 2 questions: answer with values keyed by question id (q_0, q_1)", ""},
		{"no answer", nil, `{}`, "error: a question takes answer.values keyed by question id (q_0, q_1), or option dismiss", ""},
		{"an approval's option", nil, `{"option":"approved"}`, `error: a question takes answer.values, or option dismiss (not "approved")`, ""},
		{"dismiss with values", nil, `{"option":"dismiss","values":{"q_0":"prod"}}`, "error: option dismiss dismisses the question: it takes no values or text", ""},
		{"values and text", nil, `{"values":{"q_0":"prod"},"text":"why"}`, "error: give answer.values or answer.text, not both (free text goes in values, as the answer to a question that allows it)", ""},
		{"empty values", nil, `{"values":{}}`, "error: answer.values answers no question (q_0, q_1); to decline, answer option dismiss", ""},
		{"values not an object", nil, `{"values":["prod"]}`, "error: answer.values is not an object", ""},
		{"no such question", nil, `{"values":{"q_0":"prod","q_7":"x","Deploy where?":"x"}}`, "error: no question Deploy where?, q_7 in this form (it asks q_0, q_1)", ""},
		{"a list on a single-select question", nil, `{"values":{"q_0":["prod"]}}`, "error: question q_0: it takes one choice, not a list", ""},
		{"two free texts", nil, `{"values":{"q_1":["a","b"]}}`, "error: question q_1: it takes at most one free-text answer", ""},
		{"an empty list", nil, `{"values":{"q_1":[]}}`, "error: question q_1: the list chooses nothing", ""},
		{"blank free text", nil, `{"values":{"q_0":"  "}}`, "error: question q_0: the free-text answer is empty", ""},
		{"a number", nil, `{"values":{"q_0":2}}`, "error: question q_0: a number is not a choice id or text", ""},
		{"not a choice, no other", closed, `{"values":{"q":"maybe"}}`, `error: question q: "maybe" is not one of its choices (Yes, No)`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			qs := c.qs
			if qs == nil {
				qs = askedQuestions()
			}
			var answer map[string]any
			if err := json.Unmarshal([]byte(c.answer), &answer); err != nil {
				t.Fatal(err)
			}
			qa, err := readQuestionAnswer(qs, answer)
			var got, values string
			switch {
			case err != nil:
				got = "error: " + err.Error()
			case qa.dismiss:
				got = "dismiss"
			default:
				b, _ := json.Marshal(qa.answers)
				v, _ := json.Marshal(qa.values)
				got, values = string(b), string(v)
			}
			if got != c.kap || values != c.values {
				t.Errorf("got %s / %s\nwant %s / %s", got, values, c.kap, c.values)
			}
		})
	}
}

// newQuestionStack is a primary bridge with control on (or off), a turn
// running and a question pending.
func newQuestionStack(t *testing.T, control bool) *controlStack {
	t.Helper()
	k := newFakeKap(t, "tok", "s1")
	tb := startBridge(t, k, mapping.Primary, "", func(c *Config) {
		c.Control = Control{Enabled: control, Authenticated: true}
		// A refusal's detail is [redacted] (AEP-0004): the tests read it.
		c.Posture = mapping.Posture{Capture: aep.CaptureRedacted, AttentionCapture: aep.CaptureRedacted}
	})
	kc := <-k.conns
	kc.ack(t, kc.next(t, "subscribe"), nil, map[string][2]any{"s1": {0, "A"}})
	cs := &controlStack{tb: tb, k: k, kc: kc}
	cs.send(t, "turn.started", map[string]any{"turnId": 0, "promptId": "msg_1", "origin": map[string]any{"kind": "user"}})
	cs.send(t, "event.question.requested", askedPayload())
	evs := tb.pub.Wait(t, "the request", func(evs []*aep.Event) bool { return len(evs) == 2 })
	cs.req = evs[1]
	return cs
}

func (cs *controlStack) asked() []map[string]any {
	cs.k.mu.Lock()
	defer cs.k.mu.Unlock()
	return append([]map[string]any(nil), cs.k.asked...)
}

func dataOf(t *testing.T, e *aep.Event) map[string]any {
	t.Helper()
	d, err := e.DataMap()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestQuestionOffered(t *testing.T) {
	t.Parallel()
	cs := newQuestionStack(t, true)
	d := dataOf(t, cs.req)
	if cs.req.Type != "attention.requested" || d["kind"] != "form" || jsonOf(d["respond_via"]) != `["control","oob"]` ||
		jsonOf(d["options"]) != `[{"id":"dismiss","label":"Dismiss"}]` {
		t.Errorf("request %s %s", cs.req.Type, jsonOf(d))
	}
	want := `[{"choices":[{"id":"opt_0_0","label":"staging"},{"id":"opt_0_1","label":"prod"}],"id":"q_0","label":"Deploy where?","other":true,"type":"select"},` +
		`{"choices":[{"id":"opt_1_0","label":"ops"},{"id":"opt_1_1","label":"dev"}],"id":"q_1","label":"Notify whom?","multi":true,"other":true,"type":"select"}]`
	if got := jsonOf(d["fields"]); got != want {
		t.Errorf("fields %s\nwant %s", got, want)
	}

	off := newQuestionStack(t, false)
	if d := dataOf(t, off.req); jsonOf(d["respond_via"]) != `["oob"]` || d["options"] != nil {
		t.Errorf("without control: %s", jsonOf(d))
	}
}

// TestQuestionAnsweredThroughControl: the answer reaches kap-server's
// question endpoint in its own shape, and the broadcast that follows is
// recorded as the command's outcome, with the values it applied.
func TestQuestionAnsweredThroughControl(t *testing.T) {
	t.Parallel()
	cs := newQuestionStack(t, true)
	cmd := emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": map[string]any{
		"values": map[string]any{"q_0": "prod", "q_1": []any{"opt_1_0", "the boss"}}}})
	if r := reasonOf(cs.ack(t, cmd)); r != "accepted" {
		t.Fatalf("ack %s", r)
	}
	asked := cs.asked()
	if len(asked) != 1 || asked[0]["question_id"] != "question_1" || asked[0]["action"] != "" ||
		jsonOf(asked[0]["answers"]) != `{"q_0":{"kind":"single","option_id":"opt_0_1"},"q_1":{"kind":"multi_with_other","option_ids":["opt_1_0"],"other_text":"the boss"}}` {
		t.Fatalf("posted %s", jsonOf(asked))
	}
	// kap-server's broadcast: keyed by question text, labels joined.
	cs.send(t, "event.question.answered", map[string]any{"question_id": "question_1",
		"answers": map[string]any{"Deploy where?": "prod", "Notify whom?": "ops, the boss"}})
	evs := cs.tb.pub.Wait(t, "the outcome", func(evs []*aep.Event) bool { return len(evs) == 5 })
	answered, resolved := evs[3], evs[4]
	ad := dataOf(t, answered)
	if answered.Type != "attention.answered" || ad["via"] != "control" || ad["by"] != "dashboard" || answered.Cause != cmd.ID ||
		answered.Subject != cs.req.ID || jsonOf(ad["answer"]) != `{"values":{"q_0":"opt_0_1","q_1":["opt_1_0","the boss"]}}` {
		t.Errorf("answered %s cause %s subject %s: %s", answered.Type, answered.Cause, answered.Subject, jsonOf(ad))
	}
	if rd := dataOf(t, resolved); resolved.Type != "attention.resolved" || rd["resolution"] != "answered" || resolved.Cause != cmd.ID {
		t.Errorf("resolved %s %s cause %s", resolved.Type, jsonOf(rd), resolved.Cause)
	}
	validStream(t, evs)

	// A second answer comes too late, and says why.
	late := emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": map[string]any{"option": "dismiss"}})
	ack := cs.ack(t, late)
	if r, d := reasonOf(ack), dataOf(t, ack); r != "refused" || d["detail"] != "the question was already answered by dashboard" {
		t.Errorf("late answer: %s %v", r, d["detail"])
	}
	if n := len(cs.asked()); n != 1 {
		t.Errorf("the late answer reached kap-server (%d posts)", n)
	}
}

// TestQuestionSecondAnswerBeforeBroadcast: a second answer that comes
// after ours was taken but before kap-server's broadcast says who answered
// and never reaches kap-server (which would refuse it as answered in
// Kimi's UI, or take it twice).
func TestQuestionSecondAnswerBeforeBroadcast(t *testing.T) {
	t.Parallel()
	cs := newQuestionStack(t, true)
	first := emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": map[string]any{"values": map[string]any{"q_0": "prod"}}})
	if r := reasonOf(cs.ack(t, first)); r != "accepted" {
		t.Fatalf("ack %s", r)
	}
	for _, answer := range []map[string]any{{"option": "dismiss"}, {"values": map[string]any{"q_0": "staging"}}} {
		ack := cs.ack(t, emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": answer}))
		if r, d := reasonOf(ack), dataOf(t, ack); r != "refused" || d["detail"] != "the question was already answered by dashboard" {
			t.Errorf("%v after ours: %s %v", answer, r, d["detail"])
		}
	}
	if n := len(cs.asked()); n != 1 {
		t.Errorf("%d posts reached kap-server, want 1", n)
	}
}

func TestQuestionDismissedThroughControl(t *testing.T) {
	t.Parallel()
	cs := newQuestionStack(t, true)
	cmd := emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": map[string]any{"option": "dismiss"}})
	if r := reasonOf(cs.ack(t, cmd)); r != "accepted" {
		t.Fatalf("ack %s", r)
	}
	if asked := cs.asked(); len(asked) != 1 || asked[0]["action"] != "dismiss" || asked[0]["answers"] != nil {
		t.Fatalf("posted %s", jsonOf(asked))
	}
	cs.send(t, "event.question.dismissed", map[string]any{"question_id": "question_1"})
	evs := cs.tb.pub.Wait(t, "the outcome", func(evs []*aep.Event) bool { return len(evs) == 5 })
	answered, resolved := evs[3], evs[4]
	if ad := dataOf(t, answered); answered.Type != "attention.answered" || jsonOf(ad["answer"]) != `{"option":"dismiss"}` ||
		ad["via"] != "control" || ad["by"] != "dashboard" || answered.Cause != cmd.ID {
		t.Errorf("answered %s %s cause %s", answered.Type, jsonOf(ad), answered.Cause)
	}
	if rd := dataOf(t, resolved); resolved.Type != "attention.resolved" || rd["resolution"] != "dismissed" || resolved.Cause != cmd.ID {
		t.Errorf("resolved %s %s", resolved.Type, jsonOf(rd))
	}
	validStream(t, evs)
}

// TestQuestionAnsweredInKimi: Kimi's own UI answers first. The request is
// withdrawn (answered via oob with what was chosen, then resolved), and an
// answer of ours after it is refused without reaching kap-server.
func TestQuestionAnsweredInKimi(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		frame   string
		payload map[string]any
		answer  string
		res     string
		detail  string
	}{
		{"event.question.answered", map[string]any{"question_id": "question_1", "answers": map[string]any{"Deploy where?": "staging"}},
			`{"values":{"q_0":"opt_0_0"}}`, "answered", "the question was already answered in Kimi's own UI"},
		{"event.question.dismissed", map[string]any{"question_id": "question_1"},
			`{"option":"dismiss"}`, "dismissed", "the question was already dismissed in Kimi's own UI"},
	} {
		t.Run(c.frame, func(t *testing.T) {
			cs := newQuestionStack(t, true)
			cs.send(t, c.frame, c.payload)
			evs := cs.tb.pub.Wait(t, "the withdrawal", func(evs []*aep.Event) bool { return len(evs) == 4 })
			answered, resolved := evs[2], evs[3]
			if ad := dataOf(t, answered); answered.Type != "attention.answered" || ad["via"] != "oob" || ad["by"] != nil ||
				jsonOf(ad["answer"]) != c.answer || answered.Subject != cs.req.ID {
				t.Errorf("answered %s %s", answered.Type, jsonOf(ad))
			}
			if rd := dataOf(t, resolved); rd["resolution"] != c.res || resolved.Subject != cs.req.ID {
				t.Errorf("resolved %s", jsonOf(rd))
			}
			ack := cs.ack(t, emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": map[string]any{"values": map[string]any{"q_0": "prod"}}}))
			if r, d := reasonOf(ack), dataOf(t, ack); r != "refused" || d["detail"] != c.detail {
				t.Errorf("late answer: %s %v", r, d["detail"])
			}
			if len(cs.asked()) != 0 {
				t.Errorf("the late answer reached kap-server: %s", jsonOf(cs.asked()))
			}
			validStream(t, cs.tb.pub.All())
		})
	}
}

// TestQuestionRefusals: an answer that cannot be applied is refused and
// the question stays pending for a good one; one kap-server says comes too
// late (answered in Kimi's UI before its broadcast reached the bridge) is
// refused with that reason.
func TestQuestionRefusals(t *testing.T) {
	t.Parallel()
	cs := newQuestionStack(t, true)
	ack := cs.ack(t, emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": map[string]any{"values": map[string]any{"q_0": []any{"prod"}}}}))
	if r, d := reasonOf(ack), dataOf(t, ack); r != "invalid" || d["detail"] != "question q_0: it takes one choice, not a list" {
		t.Errorf("bad answer: %s %v", r, d["detail"])
	}
	if len(cs.asked()) != 0 {
		t.Fatalf("a refused answer reached kap-server")
	}
	cs.k.mu.Lock()
	cs.k.qclosed = true
	cs.k.mu.Unlock()
	for _, answer := range []map[string]any{{"values": map[string]any{"q_0": "prod"}}, {"option": "dismiss"}} {
		ack = cs.ack(t, emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": answer}))
		if r, d := reasonOf(ack), dataOf(t, ack); r != "refused" || d["detail"] != "the question was already answered or dismissed in Kimi's own UI" {
			t.Errorf("%v on a closed question: %s %v", answer, r, d["detail"])
		}
	}
	if n := len(cs.asked()); n != 2 {
		t.Errorf("%d posts, want 2", n)
	}

	off := newQuestionStack(t, false)
	if r := reasonOf(off.ack(t, emittertest.Command(t, CmdRespond, "s1", off.req.ID, map[string]any{"answer": map[string]any{"option": "dismiss"}}))); r != "unsupported" {
		t.Errorf("control off: %s", r)
	}
}

// TestQuestionCancelledTurn: the bridge's own cancel of the turn dismisses
// the question on kap-server; that is the cancel's outcome, not an answer.
func TestQuestionCancelledTurn(t *testing.T) {
	t.Parallel()
	cs := newQuestionStack(t, true)
	cs.k.mu.Lock()
	cs.k.active = "msg_1"
	cs.k.mu.Unlock()
	cancel := emittertest.Command(t, CmdCancel, "s1", "", map[string]any{"scope": "run"})
	if r := reasonOf(cs.ack(t, cancel)); r != "accepted" {
		t.Fatalf("cancel %s", r)
	}
	cs.send(t, "event.question.dismissed", map[string]any{"question_id": "question_1"})
	evs := cs.tb.pub.Wait(t, "the dismissal", func(evs []*aep.Event) bool { return len(evs) == 4 })
	if d := dataOf(t, evs[3]); evs[3].Type != "attention.resolved" || d["resolution"] != "dismissed" || evs[3].Cause != cancel.ID {
		t.Errorf("%s %s cause %s", evs[3].Type, jsonOf(d), evs[3].Cause)
	}
	ack := cs.ack(t, emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": map[string]any{"option": "dismiss"}}))
	if d := dataOf(t, ack); !strings.HasPrefix(fmt.Sprint(d["detail"]), "the question was already dismissed: its turn was cancelled by dashboard") {
		t.Errorf("late answer: %v", d["detail"])
	}
}

// TestQuestionRestart: a restarted bridge reads the questions back from its
// own log, answers them, and remembers how one closed.
func TestQuestionRestart(t *testing.T) {
	t.Parallel()
	qs := askedQuestions()
	p := mapping.Posture{Capture: aep.CaptureRedacted, AttentionCapture: aep.CaptureRedacted}
	req := mapping.OfferedQuestion(mapping.MapFrame(mapping.Frame{Type: "event.question.requested", HasSeq: true, SessionID: "s1", Payload: askedPayload()}, mapping.Primary, p).Events[0], true)
	ev := &aep.Event{ID: "req1", Type: req.Type, Subject: req.Subject, Time: "2026-11-30T11:00:00.000Z"}
	if err := ev.SetData(req.Data); err != nil {
		t.Fatal(err)
	}
	m := newMachine(mapping.Primary, p, true, nil)
	m.fold(ev)
	rec := m.byReq["req1"]
	if rec == nil || !rec.question || !rec.options || fmt.Sprint(rec.questions) != fmt.Sprint(qs) {
		t.Fatalf("read back %+v", rec)
	}
	ans := &aep.Event{ID: "a1", Type: "attention.answered", Subject: "req1"}
	ans.SetData(map[string]any{"answer": map[string]any{"option": "dismiss"}, "via": "control", "by": "alice", mapping.DataSurface: "cli"}) //nolint:errcheck // a literal
	m.fold(ans)
	res := &aep.Event{ID: "r1", Type: "attention.resolved", Subject: "req1"}
	res.SetData(map[string]any{"resolution": "dismissed"}) //nolint:errcheck // a literal
	m.fold(res)
	if m.byReq["req1"] != nil || m.closed["req1"] != "dismissed by alice (cli)" {
		t.Errorf("after the outcome: %v %q", m.byReq["req1"], m.closed["req1"])
	}
}

// TestClosedQuestionsBounded: the memory of closed questions keeps the
// latest maxClosed.
func TestClosedQuestionsBounded(t *testing.T) {
	t.Parallel()
	m := newMachine(mapping.Primary, mapping.DefaultPosture(), true, nil)
	for i := range maxClosed + 10 {
		m.closeQuestion(fmt.Sprint(i), "answered")
	}
	if len(m.closed) != maxClosed || m.closed["9"] != "" || m.closed["10"] == "" || len(m.closedOrder) != maxClosed {
		t.Errorf("%d kept", len(m.closed))
	}
}
