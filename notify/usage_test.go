package notify_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/notify"
	"github.com/aep-kimi/aep-kimi/relay"
)

// step publishes a kimi web step's figures: tokens used, and the context
// (in tokens, of a 100k limit) when ctx >= 0.
func (st *stage) step(t *testing.T, session string, used, ctx int64) *aep.Event {
	t.Helper()
	data := map[string]any{mapping.DataInputTokens: used, mapping.DataOutputTokens: 0}
	if ctx >= 0 {
		data[mapping.DataContextTokens], data[mapping.DataContextLimit] = ctx, 100_000
	}
	return st.publish(t, session, "x.kimi-code.web.turn.step.completed", "", data, aep.CaptureMetadata)
}

// usageStage is a stage notifying rec of the usage spec given.
func usageStage(t *testing.T, spec string) (*stage, *recorder) {
	t.Helper()
	rec := &recorder{name: "rec"}
	return newStage(t, notify.Config{Targets: []notify.Target{rec}, Usage: usageSpec(t, spec)}, nil), rec
}

func usageSpec(t *testing.T, s string) notify.UsageSpec {
	t.Helper()
	spec, err := notify.ParseUsage(s)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// usageAlerts are the usage messages r got, by threshold.
func usageAlerts(r *recorder) map[string][]notify.Message {
	out := map[string][]notify.Message{}
	for _, m := range r.got() {
		if m.Kind == notify.KindUsage {
			out[m.Usage.Threshold] = append(out[m.Usage.Threshold], m)
		}
	}
	return out
}

// settle waits until the notifier has taken everything published so far:
// the marker session's crossing reaches the recorder.
func (st *stage) settle(t *testing.T, r *recorder, marker string) {
	t.Helper()
	st.step(t, marker, 1_000_000, 99_000)
	poll.Must(t, 5*time.Second, "the marker's alert", func() bool {
		for _, m := range r.got() {
			if m.Kind == notify.KindUsage && m.Session == marker {
				return true
			}
		}
		return false
	})
}

// A session crossing a threshold is notified once per threshold, whatever
// its figures do after; below it nothing is sent; what is sent says the
// session's figures at metadata and nothing of its prompts.
func TestUsageAlertOnce(t *testing.T) {
	t.Parallel()
	st, rec := usageStage(t, "context=80%,tokens=50k")
	st.start(t, "s1")
	st.step(t, "s1", 10_000, 50_000)
	st.step(t, "s1", 10_000, 79_999)
	st.publish(t, "s1", "run.started", "", map[string]any{"prompt": "a secret prompt"}, aep.CaptureFull)
	st.step(t, "s1", 10_000, 80_000) // crosses context=80%
	st.step(t, "s1", 10_000, 95_000)
	st.step(t, "s1", 10_000, 20_000) // compacted: below again; crosses tokens=50k
	st.step(t, "s1", 10_000, 90_000) // context again: not told twice
	st.settle(t, rec, "marker")

	got := usageAlerts(rec)
	if len(got["context=80%"]) != 2 || len(got["tokens=50k"]) != 2 { // s1's and the marker's
		t.Fatalf("alerts %v", got)
	}
	var ctx, tok notify.Message
	for _, m := range got["context=80%"] {
		if m.Session == "s1" {
			ctx = m
		}
	}
	for _, m := range got["tokens=50k"] {
		if m.Session == "s1" {
			tok = m
		}
	}
	if ctx.Title != "Context 80% full (alert at 80%)" || ctx.Body != "acme-shop · s1\n30.0k tokens · context 80% · 30.0k in the last hour" ||
		ctx.Usage.Context.Tokens != 80_000 || ctx.Usage.Tokens != 30_000 || !strings.Contains(ctx.Open, "?session=s1") {
		t.Errorf("context alert %+v %+v", ctx, ctx.Usage)
	}
	if tok.Title != "50.0k tokens used (alert at 50k)" || tok.Usage.Tokens != 50_000 || tok.Usage.BurnPerHour != 50_000 {
		t.Errorf("tokens alert %+v %+v", tok, tok.Usage)
	}
	for _, m := range rec.got() {
		if strings.Contains(m.Title+m.Body, "secret") || len(m.Answers) > 0 {
			t.Errorf("a usage alert says more than metadata or offers answers: %+v", m)
		}
	}
}

// A companion (the kimi web bridge's view of a hooked session) counts
// toward its Kimi session: one alert, under the Kimi session's id.
func TestUsageAlertJoinsCompanions(t *testing.T) {
	t.Parallel()
	st, rec := usageStage(t, "tokens=30k")
	st.start(t, "k1")
	st.step(t, "k1", 20_000, -1)
	ev := &aep.Event{AEP: aep.Version, ID: aep.NewID(), Type: "x.kimi-code.web.turn.step.completed", Time: aep.FormatTime(time.Now()),
		Source: "aep://test/agent/kimi-code/web/session/k1", Agent: "kimi-code", Session: "k1.web",
		Seq: aep.Int64(0), Epoch: aep.Int64(1), Capture: aep.CaptureMetadata.String()}
	if err := ev.SetExt(mapping.ExtKimiSession, "k1"); err != nil {
		t.Fatal(err)
	}
	if err := ev.SetData(map[string]any{mapping.DataInputTokens: 15_000, mapping.DataContextTokens: 40_000, mapping.DataContextLimit: 100_000}); err != nil {
		t.Fatal(err)
	}
	st.em.Publish(ev)
	st.settle(t, rec, "marker")
	got := usageAlerts(rec)["tokens=30k"]
	if len(got) != 2 || got[0].Session != "k1" || got[0].Usage.Tokens != 35_000 || got[0].Usage.Context.Tokens != 40_000 {
		t.Fatalf("alerts %+v", got)
	}
}

// A restarted notifier starts from the relay's history: a crossing the
// history holds was sent before and is not sent again, even as the
// session's figures go on past the threshold; a new crossing is sent; a
// duplicate of the crossing event (a reconnecting emitter's re-send)
// changes nothing.
func TestUsageAlertNotAgainAfterRestart(t *testing.T) {
	t.Parallel()
	backend := relay.NewMemoryBackend(1000, 100)
	spec := usageSpec(t, "context=80%")
	rec1 := &recorder{name: "rec1"}
	st1 := newStageWith(t, notify.Config{Targets: []notify.Target{rec1}, Usage: spec}, relay.Config{Backend: backend})
	st1.start(t, "s1")
	crossing := st1.step(t, "s1", 1000, 85_000)
	st1.settle(t, rec1, "m1")
	if n := len(usageAlerts(rec1)["context=80%"]); n != 2 {
		t.Fatalf("first notifier: %d alerts", n)
	}
	st1.stop()

	rec2 := &recorder{name: "rec2"}
	st2 := newStageWith(t, notify.Config{Targets: []notify.Target{rec2}, Usage: spec}, relay.Config{Backend: backend})
	st2.seq = st1.seq
	st2.step(t, "s1", 1000, 90_000)
	dup, err := relay.NewMessage(crossing, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	backend.Ingest([]*relay.Message{dup})
	st2.settle(t, rec2, "m2")
	for _, m := range rec2.got() {
		if m.Session != "m2" {
			t.Errorf("sent again after the restart: %+v", m)
		}
	}
}

// /metrics: tokens used since start, the highest burn rates by rank (never
// by session), the sessions past each threshold now; no session id in any
// label.
func TestUsageMetrics(t *testing.T) {
	t.Parallel()
	st, rec := usageStage(t, "context=50%")
	st.start(t, "s1")
	st.step(t, "s1", 1000, 60_000)
	st.step(t, "s2", 3000, 10_000)
	st.settle(t, rec, "marker") // 1M tokens, 99% context
	reg := prometheus.NewPedanticRegistry()
	for _, c := range st.n.Collectors() {
		reg.MustRegister(c)
	}
	want := `
# HELP aepkimi_notify_usage_burn_tokens_per_hour The highest token burn rates among the sessions: tokens each used in the last hour, by rank (1 is the highest); never by session, whose ids would be a new series each.
# TYPE aepkimi_notify_usage_burn_tokens_per_hour gauge
aepkimi_notify_usage_burn_tokens_per_hour{rank="1"} 1e+06
aepkimi_notify_usage_burn_tokens_per_hour{rank="2"} 3000
aepkimi_notify_usage_burn_tokens_per_hour{rank="3"} 1000
aepkimi_notify_usage_burn_tokens_per_hour{rank="4"} 0
aepkimi_notify_usage_burn_tokens_per_hour{rank="5"} 0
# HELP aepkimi_notify_usage_sessions_over Sessions not ended whose figures are at or past a --notify-usage threshold now.
# TYPE aepkimi_notify_usage_sessions_over gauge
aepkimi_notify_usage_sessions_over{threshold="context=50%"} 2
# HELP aepkimi_notify_usage_tokens_total Tokens the sessions used, as their events report them, since the relay started (rate(...[1h])*3600 is the fleet's burn per hour).
# TYPE aepkimi_notify_usage_tokens_total counter
aepkimi_notify_usage_tokens_total{direction="input"} 1.004e+06
aepkimi_notify_usage_tokens_total{direction="output"} 0
# HELP aepkimi_notify_usage_alerts_total Sessions that crossed a --notify-usage threshold and were notified, by threshold.
# TYPE aepkimi_notify_usage_alerts_total counter
aepkimi_notify_usage_alerts_total{threshold="context=50%"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "aepkimi_notify_usage_burn_tokens_per_hour",
		"aepkimi_notify_usage_sessions_over", "aepkimi_notify_usage_tokens_total", "aepkimi_notify_usage_alerts_total"); err != nil {
		t.Error(err)
	}
}

// GET /notify/usage says the thresholds and where the page marks a
// session near its limit (the lowest context threshold).
func TestUsageAPI(t *testing.T) {
	t.Parallel()
	st, _ := usageStage(t, "tokens=200k,context=90%,context=70%")
	var rep notify.UsageReport
	httpcall.Get(t, st.url+notify.PathUsage, testToken).Want(t, http.StatusOK).JSON(t, &rep)
	if strings.Join(rep.Thresholds, ",") != "tokens=200k,context=90%,context=70%" || rep.NearContextPercent != 70 {
		t.Errorf("report %+v", rep)
	}
}
