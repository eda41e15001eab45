package aep

import (
	"strings"
	"testing"
)

const okEnv = `"aep":"0.1","id":"I","time":"2026-07-03T10:00:00Z","source":"aep://h/agent/a/session/s","agent":"a"`

func TestValidateEnvelope(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, event string
		wantRule    string // "" = valid
	}{
		{"session event", `{` + okEnv + `,"type":"run.started","session":"s","seq":0}`, ""},
		{"vendor type", `{` + okEnv + `,"type":"x.kimi-code.session.heartbeat","session":"s","seq":0}`, ""},
		{"vendor type with web token", `{` + okEnv + `,"type":"x.kimi-code.web.turn.started","session":"s","seq":1}`, ""},
		{"agent event", `{` + okEnv + `,"type":"agent.heartbeat"}`, ""},
		{"command", `{` + okEnv + `,"type":"control.cancel","session":"s","data":{"scope":"run"}}`, ""},
		{"vendor command", `{` + okEnv + `,"type":"x.kimi-code.control.instruct","session":"s"}`, ""},
		{"missing id", `{"aep":"0.1","type":"run.started","time":"2026-07-03T10:00:00Z","source":"aep://h","agent":"a","session":"s","seq":0}`, "§5.1"},
		{"empty subject", `{` + okEnv + `,"type":"run.started","session":"s","seq":0,"subject":""}`, "§5.1"},
		{"bad version", `{"aep":"1.0","id":"I","time":"2026-07-03T10:00:00Z","source":"aep://h","agent":"a","type":"run.started","session":"s","seq":0}`, "#1"},
		{"bad time", `{"aep":"0.1","id":"I","time":"yesterday","source":"aep://h","agent":"a","type":"run.started","session":"s","seq":0}`, "#5"},
		{"time without zone", `{"aep":"0.1","id":"I","time":"2026-07-03T10:00:00","source":"aep://h","agent":"a","type":"run.started","session":"s","seq":0}`, "#5"},
		{"source not uri", `{"aep":"0.1","id":"I","time":"2026-07-03T10:00:00Z","source":"not a uri","agent":"a","type":"run.started","session":"s","seq":0}`, "#6"},
		{"vendor type too short", `{` + okEnv + `,"type":"x.acme.foo","session":"s","seq":0}`, "§6"},
		{"unknown category", `{` + okEnv + `,"type":"banana.peeled","session":"s","seq":0}`, "§6"},
		{"agent with session", `{` + okEnv + `,"type":"agent.presence","session":"s"}`, "§5.2"},
		{"command with seq", `{` + okEnv + `,"type":"control.pause","session":"s","seq":1}`, "§2.2"},
		{"session without seq", `{` + okEnv + `,"type":"tool.requested","session":"s"}`, "§5.2"},
		{"ext object", `{` + okEnv + `,"type":"run.started","session":"s","seq":0,"acme":{"a":1}}`, "§5.4"},
		{"ext float", `{` + okEnv + `,"type":"run.started","session":"s","seq":0,"acme":1.5}`, "§5.4"},
		{"ext bad name", `{` + okEnv + `,"type":"run.started","session":"s","seq":0,"Acme":"x"}`, "§5.4"},
		{"traceparent", `{` + okEnv + `,"type":"run.started","session":"s","seq":0,"traceparent":"x"}`, "#14"},
		{"severity", `{` + okEnv + `,"type":"run.started","session":"s","seq":0,"severity":"fatal"}`, "§8.1"},
		{"capture", `{` + okEnv + `,"type":"run.started","session":"s","seq":0,"capture":"all"}`, "§8.2"},
		{"negative epoch", `{` + okEnv + `,"type":"run.started","session":"s","seq":0,"epoch":-1}`, "#12"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs := ValidateEnvelope(ev(t, c.event))
			if c.wantRule == "" {
				if len(vs) > 0 {
					t.Fatalf("unexpected violations: %v", vs)
				}
				return
			}
			for _, v := range vs {
				if strings.Contains(v.Rule, c.wantRule) {
					return
				}
			}
			t.Fatalf("want a %s violation, got %v", c.wantRule, vs)
		})
	}
}

func TestStreamValidator(t *testing.T) {
	t.Parallel()
	src := `"source":"aep://h/agent/a/session/s","agent":"a","aep":"0.1","time":"2026-07-03T10:00:00Z","session":"s"`
	cases := []struct {
		name   string
		events []string
		bad    bool
	}{
		{"ok run", []string{
			`{` + src + `,"id":"1","type":"run.started","run":"r","seq":0}`,
			`{` + src + `,"id":"2","type":"run.finished","run":"r","seq":1}`,
		}, false},
		{"redelivery is legal", []string{
			`{` + src + `,"id":"1","type":"run.started","run":"r","seq":0}`,
			`{` + src + `,"id":"1","type":"run.started","run":"r","seq":0}`,
		}, false},
		{"gaps are legal", []string{
			`{` + src + `,"id":"1","type":"run.started","run":"r","seq":0}`,
			`{` + src + `,"id":"2","type":"run.finished","run":"r","seq":9}`,
		}, false},
		{"new epoch resets seq", []string{
			`{` + src + `,"id":"1","type":"run.started","run":"r","seq":5}`,
			`{` + src + `,"id":"2","type":"run.started","run":"r2","seq":0,"epoch":1}`,
		}, false},
		{"seq regression", []string{
			`{` + src + `,"id":"1","type":"run.started","run":"r","seq":5}`,
			`{` + src + `,"id":"2","type":"run.started","run":"r2","seq":5}`,
		}, true},
		{"id collision", []string{
			`{` + src + `,"id":"1","type":"run.started","run":"r","seq":0}`,
			`{` + src + `,"id":"1","type":"run.started","run":"r2","seq":1}`,
		}, true},
		{"two terminals", []string{
			`{` + src + `,"id":"1","type":"run.finished","run":"r","seq":0}`,
			`{` + src + `,"id":"2","type":"run.cancelled","run":"r","seq":1}`,
		}, true},
		{"dangling attention", []string{
			`{` + src + `,"id":"1","type":"attention.requested","seq":0,"data":{"kind":"permission","prompt":"p"}}`,
			`{` + src + `,"id":"2","type":"session.ended","seq":1}`,
		}, true},
		{"attention closed first", []string{
			`{` + src + `,"id":"1","type":"attention.requested","seq":0,"data":{"kind":"permission","prompt":"p"}}`,
			`{` + src + `,"id":"2","type":"attention.resolved","subject":"1","seq":1,"data":{"resolution":"dismissed"}}`,
			`{` + src + `,"id":"3","type":"session.ended","seq":2}`,
		}, false},
		{"two session ends", []string{
			`{` + src + `,"id":"1","type":"session.ended","seq":0}`,
			`{` + src + `,"id":"2","type":"session.ended","seq":1}`,
		}, true},
		{"two acks", []string{
			`{` + src + `,"id":"1","type":"control.accepted","cause":"C","seq":0}`,
			`{` + src + `,"id":"2","type":"control.rejected","cause":"C","seq":1,"data":{"reason":"busy"}}`,
		}, true},
		{"same session name, other emitter", []string{
			`{` + src + `,"id":"1","type":"run.started","run":"r","seq":3}`,
			`{"source":"aep://other","agent":"b","aep":"0.1","time":"2026-07-03T10:00:00Z","session":"s","id":"1","type":"run.started","run":"r","seq":0}`,
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var sv StreamValidator
			var all []Violation
			for _, s := range c.events {
				all = append(all, sv.Add(ev(t, s))...)
			}
			if got := len(all) > 0; got != c.bad {
				t.Fatalf("violations %v, want bad=%v", all, c.bad)
			}
		})
	}
}

func FuzzValidate(f *testing.F) {
	f.Add(`{` + okEnv + `,"type":"run.started","session":"s","seq":0,"data":{"trigger":"user"}}`)
	f.Add(`{` + okEnv + `,"type":"attention.requested","session":"s","seq":0,"capture":"redacted","data":{"kind":"form","prompt":"p","fields":[{"id":"1","type":"select","label":"l","choices":[{"id":"a","label":"b"}]}]}}`)
	f.Add(`{` + okEnv + `,"type":"agent.presence","data":{"state":"online"}}`)
	f.Add(`{"seq":1e2,"epoch":-0}`)
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseEvent([]byte(s))
		if err != nil {
			return
		}
		_ = Validate(e)
		var sv StreamValidator
		sv.Add(e)
		sv.Add(e)
		if _, err := e.MarshalJSON(); err != nil {
			t.Fatalf("parsed event does not marshal: %v", err)
		}
	})
}
