package relay_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay"
)

func rateCmd(session string) *aep.Event {
	cmd := command(mapping.TypeRate, session, `{"rating":-1,"comment":"wrong file","by":"ada"}`)
	cmd.Run, cmd.Agent = "r1", mapping.AgentPage
	return cmd
}

// A rating needs the answer role: a watcher's is refused as unauthorized
// and reaches nobody; an answerer's reaches the emitter stamped with the
// answerer, whoever the command says sent it.
func TestRateRoleAndStamp(t *testing.T) {
	t.Parallel()
	tm := newTeam(t)
	tgt := target(t, tm.srv, "both", "kimi", "s-rate", `{"accepts":["`+mapping.TypeRate+`"]}`)

	walt := helloAs(t, tm.srv, tm.walt, "consumer", mapping.AgentPage)
	refused := rateCmd("s-rate")
	walt.send(t, refused)
	f := walt.expect(t, func(f wsFrame) bool { return f.str("type") == "error" })
	if f.str("code") != "unauthorized" || f.str("cause") != refused.ID || !strings.Contains(f.str("detail"), "answer") {
		t.Fatalf("a watcher's rating: %s", f.raw)
	}

	forged := rateCmd("s-rate")
	if forged.SetExt(mapping.ExtBy, "ada") != nil {
		t.Fatal("cannot forge")
	}
	ann := helloAs(t, tm.srv, tm.ann, "consumer", mapping.AgentPage)
	ann.send(t, forged)
	got := tgt.expect(t, func(f wsFrame) bool { return f.str("id") == forged.ID })
	if got.str(mapping.ExtBy) != "ann" {
		t.Fatalf("ann's rating reached the emitter as %s", got.raw)
	}
	tgt.quiet(t, 100*time.Millisecond) // the watcher's never came
}

// A session its emitter ended still takes ratings of its runs, through
// the socket that ended it while it stays connected; other commands to it
// find no route, and once that socket is gone neither does a rating.
func TestRateEndedSession(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	tgt := target(t, srv, "both", "kimi", "s-end", `{"accepts":["control.cancel","`+mapping.TypeRate+`"]}`)
	end := mkEvent("s-end", 1, withType("session.ended"), withData(`{"reason":"normal"}`))
	end.Agent, end.Source = "kimi", "aep://test/agent/kimi"
	tgt.send(t, end)
	syncWS(t, tgt)

	sender := helloWS(t, srv, "consumer", nil, "sender")
	cancel := command("control.cancel", "s-end", `{"scope":"session"}`)
	sender.send(t, cancel)
	if f := sender.expect(t, func(f wsFrame) bool { return f.str("type") == "error" }); f.str("code") != "no-route" {
		t.Fatalf("a cancel of an ended session: %s", f.raw)
	}
	cmd := rateCmd("s-end")
	sender.send(t, cmd)
	tgt.expect(t, func(f wsFrame) bool { return f.str("id") == cmd.ID })

	tgt.c.CloseNow()
	eventually(t, "the emitter's socket gone", func() bool {
		res := do(t, srv, http.MethodGet, "/metrics", nil, map[string]string{"Authorization": "Bearer " + testToken})
		return strings.Contains(string(res.body), `aepkimi_relay_connections{binding="ws"} 1`)
	})
	again := rateCmd("s-end")
	sender.send(t, again)
	if f := sender.expect(t, func(f wsFrame) bool { return f.str("type") == "error" }); f.str("code") != "no-route" || f.str("cause") != again.ID {
		t.Fatalf("a rating after the emitter left: %s", f.raw)
	}
}

// Assessments admitted are counted on /metrics by kind and label, once
// each: a redelivery is not a second rating.
func TestAssessmentsCounted(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: testToken})
	down := mkEvent("s-m", 0, withType(mapping.TypeFeedback), withData(`{"rating":-1,"label":"thumbs_down","source":"human"}`))
	up := mkEvent("s-m", 1, withType(mapping.TypeFeedback), withData(`{"rating":1,"label":"thumbs_up","source":"human"}`))
	mustPost(t, srv, down, up)
	mustPost(t, srv, down)
	res := do(t, srv, http.MethodGet, "/metrics", nil, map[string]string{"Authorization": "Bearer " + testToken})
	for _, want := range []string{
		`aepkimi_relay_assessments_total{kind="feedback",label="thumbs_down"} 1`,
		`aepkimi_relay_assessments_total{kind="feedback",label="thumbs_up"} 1`,
	} {
		if !strings.Contains(string(res.body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
