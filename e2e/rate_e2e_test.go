// Ratings of a real Kimi session, from the CLI and from the page in
// Chromium, through the relay into an exporter's trace.

package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/export"
	"github.com/aep-kimi/aep-kimi/internal/testkit/browsertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/jaegertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest/pagetest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// A real Kimi session rated with `aep-kimi rate` through the real relay
// and adapter after it ended: the rating is recorded in the session,
// caused by the run's end, naming the person whose token sent it. The
// attacks get nowhere: a watcher's rating, a note too long or holding a
// control character, a rating naming someone else (the relay writes the
// sender's name over it), a socket from a foreign Origin.
func TestE2ERate(t *testing.T) {
	t.Parallel()
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t)
	ann, walt := st.AddPerson(t, "ann", "answer"), st.AddPerson(t, "walt", "watch")
	ev, fin := st.FinishedRun(t, kimi)
	session := ev[0].Session
	short := consumer.BareID(session)[:8]

	for _, c := range []struct {
		what, Token string
		args        []string
		code        int
		says        string
	}{
		{"a watcher", walt, []string{short, "down"}, stacktest.ExitRejected, "needs the answer role"},
		{"a note too long", ann, []string{short, "down", "--note", strings.Repeat("x", mapping.MaxNoteRunes+1)}, 2, "longer than 500"},
		{"a control character", ann, []string{short, "down", "--note", "ok\x1b[2Jgone"}, 2, "control character"},
		{"no verdict", ann, []string{short, "meh"}, 2, "up or down"},
		{"an unknown session", ann, []string{"no-such-session", "up"}, stacktest.ExitUnknownSession, "unknown session"},
		{"an unknown run", ann, []string{session, "r-nope", "up"}, stacktest.ExitUnknownRequest, "unknown run"},
	} {
		code, out := st.CliAs(t, c.Token, append([]string{"rate"}, c.args...)...)
		if code != c.code || !strings.Contains(out, c.says) || strings.Count(strings.TrimSpace(out), "\n") != 0 {
			t.Errorf("rate with %s: exit %d, %q; want exit %d, one line saying %q", c.what, code, out, c.code, c.says)
		}
	}
	ctx := context.Background()
	// A socket from another site's page is refused before it can say anything.
	h := http.Header{}
	h.Set("Authorization", "Bearer "+ann)
	h.Set("Origin", "https://evil.example")
	if c, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(st.RelayURL, "http")+"/socket", &websocket.DialOptions{HTTPHeader: h}); err == nil {
		c.CloseNow()
		t.Error("a socket from a foreign Origin was accepted")
	} else if res == nil || res.StatusCode != http.StatusForbidden {
		t.Errorf("a socket from a foreign Origin: %v %v", res, err)
	}
	if got := st.Feedback(t); len(got) != 0 {
		t.Fatalf("refused ratings were recorded: %v", got)
	}

	// A rating that names someone else is recorded as its sender's.
	forged, err := client.Rate(session, fin.Run, mapping.VerdictUp, "")
	if err != nil {
		t.Fatal(err)
	}
	if forged.SetExt(mapping.ExtBy, "owner") != nil || forged.SetData(map[string]any{"rating": 1, mapping.DataBy: "owner", "source": "admin"}) != nil {
		t.Fatal("cannot forge")
	}
	if res, err := client.SendCommand(ctx, st.RelayURL, ann, nil, forged, 10*time.Second); err != nil || !res.Accepted() {
		t.Fatalf("ann's forged rating: %+v %v", res, err)
	}

	const note = "it only said hello"
	if code, out := st.CliAs(t, ann, "rate", short, "down", "--note", note); code != 0 || !strings.Contains(out, "accepted "+mapping.TypeRate) {
		t.Fatalf("ann's rating: exit %d: %s", code, out)
	}
	got := st.Feedback(t)
	if len(got) != 2 {
		t.Fatalf("%d ratings recorded, want 2", len(got))
	}
	for i, want := range []struct{ label, surface, comment string }{{mapping.LabelThumbsUp, mapping.AgentCLI, ""}, {mapping.LabelThumbsDown, "cli", note}} {
		d := stacktest.DataOf(got[i])
		if got[i].Run != fin.Run || got[i].Cause != fin.ID || d[mapping.DataBy] != "ann" || d["label"] != want.label || d["source"] != mapping.FeedbackSource ||
			(want.comment != "" && d["comment"] != want.comment) {
			t.Errorf("rating %d: run %s cause %s data %v", i, got[i].Run, got[i].Cause, d)
		}
	}
	// The relay holds them as the adapter logged them, byte for byte.
	_, logBytes, _ := st.OneSession(t)
	held := st.RelayEvents(t, session)
	for _, line := range strings.Split(strings.TrimSpace(string(logBytes)), "\n") {
		if strings.Contains(line, `"type":"`+mapping.TypeFeedback+`"`) && !slices.ContainsFunc(held, func(b []byte) bool { return string(b) == line }) {
			t.Errorf("the relay does not hold the rating %s", line)
		}
	}
	if m := st.Get(t, st.Token, "/metrics"); !strings.Contains(m, `aepkimi_relay_assessments_total{kind="feedback",label="thumbs_down"} 1`) ||
		!strings.Contains(m, `aepkimi_relay_assessments_total{kind="feedback",label="thumbs_up"} 1`) {
		t.Error("the relay's /metrics does not count the two ratings")
	}
}

// A thumbs-down given on the fleet page in Chromium, on a real Kimi
// session that has ended, reaches a real Jaeger through `up --otlp` as the
// GenAI evaluation result: an instant span under the run's span, the
// verdict and who gave it, and not the note, which is above the exporter's
// default ceiling.
func TestE2ERatePageJaeger(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end: runs Kimi, Chromium and Jaeger")
	}
	kimi := kimiharness.Require(t)
	j := jaegertest.Start(t)
	st := stacktest.NewUpStack(t)
	st.Up(t, nil, "--web=false", "--otlp", j.OTLP)
	ev, fin := st.FinishedRun(t, kimi)
	session := ev[0].Session

	b := pagetest.OpenPage(t, st)
	b.Click("open the session", `#fleet [data-session=`+browsertest.Quote(session)+`] button`)
	form := `[data-rate=` + browsertest.Quote(fin.Run) + `]`
	b.WaitJS("the finished turn's thumbs", `document.querySelector('`+form+` [data-verdict="down"]') !== null`)
	const note = "it only said hello"
	b.MustRun("type the note", chromedp.SendKeys(form+` [data-rate-note]`, note, chromedp.ByQuery))
	b.Click("thumbs down", form+` [data-verdict="down"]`)
	b.WaitJS("the rating on the turn", `document.querySelector('#timeline [data-kind="feedback"][data-verdict="down"][data-by="owner"]') !== null`)
	got := st.Feedback(t)
	if len(got) != 1 || stacktest.DataOf(got[0])["comment"] != note || stacktest.DataOf(got[0])[mapping.DataSurface] != "page" {
		t.Fatalf("the page's rating as the session log holds it: %v", got)
	}

	var span, runSpan jaegertest.Span
	if !poll.Until(30*time.Second, func() bool {
		traces, err := j.Traces(fin.Agent)
		if err != nil {
			return false
		}
		for _, tr := range traces {
			for _, sp := range tr.Spans {
				switch {
				case sp.OperationName == export.EvaluationEvent:
					span = sp
				case sp.Tag("aep.run_id") == fin.Run && sp.Tag("gen_ai.operation.name") == "invoke_agent":
					runSpan = sp
				}
			}
		}
		return span.SpanID != "" && runSpan.SpanID != ""
	}) {
		t.Fatalf("jaeger holds no evaluation span (%q) or no run span (%q)\n%s", span.SpanID, runSpan.SpanID, st.Relay.Logs.String())
	}
	if span.TraceID != runSpan.TraceID || span.Parent() != runSpan.SpanID || span.Tag("gen_ai.evaluation.score.label") != mapping.LabelThumbsDown ||
		span.Tag("gen_ai.evaluation.name") != export.FeedbackEvaluation || span.Tag(export.AttrFeedbackBy) != "owner" {
		t.Errorf("evaluation span %+v under run span %s", span, runSpan.SpanID)
	}
	if span.Tag("gen_ai.evaluation.explanation") != nil {
		t.Errorf("the note left above the exporter's ceiling: %v", span.Tag("gen_ai.evaluation.explanation"))
	}
}
