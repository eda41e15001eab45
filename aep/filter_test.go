package aep

import (
	"errors"
	"testing"
)

func ev(t *testing.T, s string) *Event {
	t.Helper()
	e, err := ParseEvent([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestFilterMatch(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, filter, event string
		want                bool
	}{
		{"empty matches all", `{}`, `{"type":"agent.heartbeat"}`, true},
		{"type prefix", `{"type":"tool.*"}`, `{"type":"tool.failed"}`, true},
		{"type prefix is strict", `{"type":"tool.*"}`, `{"type":"toolbox.x"}`, false},
		{"type prefix needs the dot", `{"type":"attention.*"}`, `{"type":"attention"}`, false},
		{"inclusion with pattern", `{"type":["run.finished","x.kimi-code.*"]}`, `{"type":"x.kimi-code.session.heartbeat"}`, true},
		{"severity default info", `{"severity":{"lte":"info"}}`, `{"type":"run.started"}`, true},
		{"severity gte", `{"severity":{"gte":"warning"}}`, `{"type":"tool.failed","severity":"warning"}`, true},
		{"severity equality", `{"severity":"notice"}`, `{"type":"x","severity":"notice"}`, true},
		{"capture default", `{"capture":"metadata"}`, `{"type":"run.started"}`, true},
		{"epoch default", `{"epoch":0}`, `{"type":"run.started"}`, true},
		{"epoch mismatch", `{"epoch":1}`, `{"type":"run.started","epoch":2}`, false},
		{"absent never matches", `{"run":"r1"}`, `{"type":"run.started"}`, false},
		{"ext bool", `{"kimispooled":true}`, `{"type":"run.started","kimispooled":true}`, true},
		{"ext no coercion", `{"kimispooled":"true"}`, `{"type":"run.started","kimispooled":true}`, false},
		{"ext int", `{"acmen":3}`, `{"type":"run.started","acmen":3}`, true},
		{"conjunction", `{"agent":"kimi-code","session":"s1"}`, `{"agent":"kimi-code","session":"s2"}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := ParseFilter([]byte(c.filter))
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Match(ev(t, c.event)); got != c.want {
				t.Fatalf("Match = %v, want %v", got, c.want)
			}
		})
	}
}

func TestFilterFailsClosed(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"seq":1}`, `{"time":"x"}`, `{"data":{}}`, `{"aep":"0.1"}`, `{"traceparent":"x"}`,
		`{"type":"*"}`, `{"type":"tool*"}`, `{"agent":"a*"}`, `{"Bad":"x"}`, `{"severity":{"gt":"info"}}`,
		`{"severity":{"gte":"loud"}}`, `{"severity":"loud"}`, `{"agent":[]}`, `{"agent":{"x":1}}`,
		`{"agent":1.5}`, `[]`, `"x"`, `null`, `{`, `{"agent":"a"} x`, `{"capture":"everything"}`,
		`{"severity":{}}`,
	} {
		t.Run(in, func(t *testing.T) {
			_, err := ParseFilter([]byte(in))
			if !errors.Is(err, ErrInvalidFilter) {
				t.Fatalf("ParseFilter(%s) = %v, want invalid-filter", in, err)
			}
		})
	}
}

func TestNilAndEmptyFilter(t *testing.T) {
	t.Parallel()
	var f *Filter
	if !f.Match(&Event{Type: "run.started"}) || !f.Empty() {
		t.Fatal("nil filter must match all")
	}
	g, err := ParseFilter(nil)
	if err != nil || !g.Empty() {
		t.Fatal("empty input is the empty filter")
	}
}

func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{`{}`, `{"type":["attention.*","error.*"],"severity":{"gte":"notice"}}`, `{"session":"s"}`, `{"acme":1}`, `{"seq":1}`} {
		f.Add(s)
	}
	probe := &Event{Type: "tool.failed", Severity: "warning", Agent: "a", Session: "s"}
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := ParseFilter([]byte(s))
		if err != nil {
			if !errors.Is(err, ErrInvalidFilter) {
				t.Fatalf("error not classified invalid-filter: %v", err)
			}
			return
		}
		flt.Match(probe)
	})
}
