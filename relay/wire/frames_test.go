package wire_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// The frames that used to be built from maps keep the bytes encoding/json
// gives a map (members sorted): the move to types changed no wire bytes.
func TestEncodeMatchesMapEncoding(t *testing.T) {
	mustJSON := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, tc := range []struct {
		name string
		got  []byte
		want any
	}{
		{"subscribed", wire.Encode(&wire.Subscribed{ID: "s1"}), map[string]string{"type": "subscribed", "id": "s1"}},
		{"unsubscribed", wire.Encode(&wire.Unsubscribed{ID: json.RawMessage(`7`)}), map[string]any{"type": "unsubscribed", "id": 7}},
		{"unsubscribed without id", wire.Encode(&wire.Unsubscribed{}), map[string]any{"type": "unsubscribed", "id": nil}},
		{"replay-exhausted", wire.Encode(&wire.ReplayExhausted{Sub: "r", Session: "s", Earliest: wire.Position{Epoch: 1, Seq: 4}}),
			map[string]any{"type": "replay-exhausted", "sub": "r", "session": "s", "earliest": wire.Position{Epoch: 1, Seq: 4}}},
		{"subscribe", wire.Encode(&wire.Subscribe{ID: wire.ID("acks-1"), Filter: json.RawMessage(`{"session":"s","type":["control.accepted"]}`)}),
			map[string]any{"type": "subscribe", "id": "acks-1", "filter": map[string]any{"session": "s", "type": []string{"control.accepted"}}}},
		{"emitter hello", wire.Encode(wire.NewHello(wire.RoleEmitter, wire.Identity{Agent: "kimi-code", Instance: "h/1"},
			wire.Capabilities{Emits: []string{"session"}, Capture: []string{"metadata"}, Control: &wire.Control{Accepts: []string{"control.cancel"}, AckWindowMS: 5000}})),
			map[string]any{
				"type": "hello", "versions": []string{"0.1"}, "role": "emitter",
				"identity": map[string]string{"agent": "kimi-code", "instance": "h/1"},
				"capabilities": map[string]any{"emits": []string{"session"}, "capture": []string{"metadata"},
					"control": map[string]any{"accepts": []string{"control.cancel"}, "ack_window_ms": 5000}},
			}},
		{"sender hello", wire.Encode(wire.NewHello(wire.RoleBoth, wire.Identity{Agent: "cli", Instance: "h/2"}, wire.Capabilities{})),
			map[string]any{"type": "hello", "versions": []string{"0.1"}, "role": "both",
				"identity": map[string]string{"agent": "cli", "instance": "h/2"}, "capabilities": map[string]any{}}},
	} {
		if want := mustJSON(tc.want); string(tc.got) != want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, tc.got, want)
		}
	}
	// Frames that were always structs keep their member order.
	for _, tc := range []struct{ got, want string }{
		{string(wire.Encode(&wire.Error{ID: json.RawMessage(`"s"`), Cause: "c", Code: "no-route", Detail: "d"})),
			`{"type":"error","id":"s","cause":"c","code":"no-route","detail":"d"}`},
		{string(wire.Encode(&wire.Error{Code: "version-unsupported", Versions: []string{"0.1"}})),
			`{"type":"error","code":"version-unsupported","versions":["0.1"]}`},
		{string(wire.Encode(&wire.Closing{Reason: "emitter stopping", Delivered: []wire.Delivered{}})),
			`{"type":"closing","reason":"emitter stopping","delivered":[]}`},
		{string(wire.Encode(&wire.Closing{Reason: "x", Delivered: []wire.Delivered{{Sub: "a", Session: "s", Epoch: 1, Seq: 2}}})),
			`{"type":"closing","reason":"x","delivered":[{"sub":"a","session":"s","epoch":1,"seq":2}]}`},
		{string(wire.PongFor(&wire.Ping{T: json.RawMessage(`12`)})), `{"type":"pong","t":12}`},
		{string(wire.PongFor(&wire.Ping{})), `{"type":"pong"}`},
		{string(wire.Encode(&wire.Roster{ID: json.RawMessage(`"r"`)})), `{"type":"roster","id":"r","entries":[]}`},
		{string(wire.Encode(wire.Unknown{Type: "x"})), `{"type":"error","code":"internal","detail":"frame encoding failed"}`},
	} {
		if tc.got != tc.want {
			t.Errorf("got  %s\nwant %s", tc.got, tc.want)
		}
	}
}

// A roster relays each claim's declarations byte for byte (AEP-0003 §4.1
// rule 4), spacing included.
func TestRosterVerbatim(t *testing.T) {
	got := string(wire.Encode(&wire.Roster{ID: json.RawMessage(`"r-1"`), Entries: []wire.RosterEntry{
		{Session: "s", Agent: "a", Instance: "i", Control: json.RawMessage(`{ "accepts": ["x"] }`), Emits: json.RawMessage(`[ "run" ]`)},
		{Session: "t"},
	}}))
	want := `{"type":"roster","id":"r-1","entries":[{"session":"s","agent":"a","instance":"i","control":{ "accepts": ["x"] },"emits":[ "run" ]},{"session":"t"}]}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestParseKinds(t *testing.T) {
	for in, want := range map[string]string{
		`{"type":"progress.status","seq":1}`:    "wire.Event",
		`{"type":"subscribe","id":"a"}`:         "*wire.Subscribe",
		`{"type":"subscribed","id":"a"}`:        "*wire.Subscribed",
		`{"type":"unsubscribe","id":"a"}`:       "*wire.Unsubscribe",
		`{"type":"unsubscribed","id":"a"}`:      "*wire.Unsubscribed",
		`{"type":"roster","id":"a"}`:            "*wire.Roster",
		`{"type":"error","code":"x"}`:           "*wire.Error",
		`{"type":"replay-exhausted","sub":"a"}`: "*wire.ReplayExhausted",
		`{"type":"closing","reason":"x"}`:       "*wire.Closing",
		`{"type":"ping","t":1}`:                 "*wire.Ping",
		`{"type":"pong"}`:                       "*wire.Pong",
		`{"type":"hello"}`:                      "*wire.Hello",
		`{"type":"gossip","x":1}`:               "wire.Unknown",
		`{"id":"no type"}`:                      "wire.Unknown",
		`null`:                                  "wire.Unknown",
	} {
		f, err := wire.Parse([]byte(in))
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if got := reflect.TypeOf(f).String(); got != want {
			t.Errorf("%s parsed as %s, want %s", in, got, want)
		}
	}
	for _, in := range []string{``, `[]`, `"hello"`, `{"type":5}`, `{"type":"hello"`} {
		if f, err := wire.Parse([]byte(in)); err == nil {
			t.Errorf("%q parsed as %#v, want an error", in, f)
		}
	}
}

// Leniency (AEP-0003 §2, §4 rule 4): unknown members are ignored, a
// mistyped member costs only itself, and a malformed capability is dropped
// without failing the hello.
func TestParseLenient(t *testing.T) {
	f, err := wire.Parse([]byte(`{"type":"error","code":"no-route","cause":7,"detail":"d","future":{"x":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	if e := f.(*wire.Error); e.Code != "no-route" || e.Detail != "d" || e.Cause != "" {
		t.Fatalf("mistyped cause: got %+v", e)
	}

	f, _ = wire.Parse([]byte(`{"type":"hello","versions":["0.2","0.1"],"identity":{"agent":"a","card":null,"instance":3},
		"capabilities":{"control":{ "accepts": ["control.cancel"], "ack_window_ms": 9 },"emits":[ "run" ],
		"filters":"attr-match","replay":[1],"roster":{},"experimental":{"x":1},"someday":{"y":2}},"extra":true}`))
	h := f.(*wire.Hello)
	if h.Role != wire.RoleConsumer {
		t.Errorf("absent role read as %q, want consumer", h.Role)
	}
	if !h.Offers("0.1") || h.Offers("0.3") {
		t.Errorf("versions %v", h.Versions)
	}
	if h.Identity.Agent != "a" || h.Identity.Instance != "" {
		t.Errorf("identity %+v", h.Identity)
	}
	c := h.Capabilities
	if c.Control == nil || !reflect.DeepEqual(c.Control.Accepts, []string{"control.cancel"}) || c.Control.AckWindowMS != 9 {
		t.Errorf("control %+v", c.Control)
	}
	if string(c.RawControl) != `{ "accepts": ["control.cancel"], "ack_window_ms": 9 }` || string(c.RawEmits) != `[ "run" ]` {
		t.Errorf("declarations not kept verbatim: %s %s", c.RawControl, c.RawEmits)
	}
	if c.Filters != nil || c.Replay != nil || c.Roster == nil || string(c.Experimental) != `{"x":1}` {
		t.Errorf("capabilities %+v", c)
	}

	for in, role := range map[string]string{
		`{"type":"hello","role":"both"}`: "both",
		`{"type":"hello","role":5}`:      "",
		`{"type":"hello","role":null}`:   "",
	} {
		f, _ := wire.Parse([]byte(in))
		if got := f.(*wire.Hello).Role; got != role {
			t.Errorf("%s: role %q, want %q", in, got, role)
		}
	}
	f, _ = wire.Parse([]byte(`{"type":"hello","capabilities":{"control":["x"],"emits":{"a":1}}}`))
	if c := f.(*wire.Hello).Capabilities; c.Control != nil || c.RawControl != nil || c.RawEmits != nil {
		t.Errorf("a control that is not an object or emits that is not an array was kept: %+v", c)
	}
	f, _ = wire.Parse([]byte(`{"type":"hello","capabilities":"none"}`))
	if c := f.(*wire.Hello).Capabilities; !reflect.DeepEqual(c, wire.Capabilities{}) {
		t.Errorf("capabilities that are not an object gave %+v", c)
	}
}

func TestSubscribeKeepsMembersRaw(t *testing.T) {
	f, _ := wire.Parse([]byte(`{"type":"subscribe","id":5,"filter":null,"from":"all","capture":"metadata"}`))
	s := f.(*wire.Subscribe)
	if string(s.ID) != `5` || wire.String(s.ID) != "" || string(s.Filter) != `null` || string(s.From) != `"all"` || wire.String(s.Capture) != "metadata" || s.Dialect != nil {
		t.Fatalf("subscribe %+v", s)
	}
}

func TestPingAt(t *testing.T) {
	f, err := wire.Parse(wire.PingAt(time.UnixMilli(1700000000123)))
	if err != nil {
		t.Fatal(err)
	}
	if p := f.(*wire.Ping); string(p.T) != "1700000000123" {
		t.Fatalf("ping t %s", p.T)
	}
}

// FuzzParse: any message parses or fails without panicking; an event has a
// dotted type and a frame none; a parsed frame re-encodes to a message
// that parses back to the same kind, and a hello keeps what it declared.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"type":"hello","versions":["0.1"],"role":"emitter","identity":{"agent":"a","instance":"i"},"capabilities":{"control":{"accepts":[]}}}`,
		`{"type":"subscribe","id":"s","filter":{"type":["run.*"]},"from":[{"session":"x","seq":1}],"capture":"metadata"}`,
		`{"type":"roster","id":"r","entries":[{"session":"s","control":{"accepts":["a"]}}]}`,
		`{"type":"error","id":"s","cause":"c","code":"no-route","detail":"d","versions":["0.1"]}`,
		`{"type":"closing","reason":"x","delivered":[{"sub":"a","session":"s","epoch":1,"seq":2}]}`,
		`{"type":"ping","t":1}`, `{"type":"pong"}`, `{"type":"unsubscribe","id":"s"}`,
		`{"type":"progress.status"}`, `{"type":"gossip"}`, `null`, `[]`, `{"type":5}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := wire.Parse(b)
		if err != nil {
			return
		}
		switch fr := fr.(type) {
		case wire.Event:
			if !strings.Contains(fr.Type, ".") {
				t.Fatalf("event with undotted type %q", fr.Type)
			}
			return
		case wire.Unknown:
			if strings.Contains(fr.Type, ".") {
				t.Fatalf("unknown frame with dotted type %q", fr.Type)
			}
			return
		case *wire.Hello:
			back, err := wire.Parse(wire.Encode(fr))
			if err != nil {
				t.Fatalf("re-encoded hello does not parse: %v", err)
			}
			h := back.(*wire.Hello)
			if h.Role != fr.Role && fr.Role != "" || h.Identity != fr.Identity || !reflect.DeepEqual(h.Versions, fr.Versions) && len(fr.Versions) > 0 {
				t.Fatalf("hello changed in a round trip: %+v -> %+v", fr, h)
			}
			return
		}
		kind := fr.Kind()
		back, err := wire.Parse(wire.Encode(fr))
		if err != nil {
			t.Fatalf("re-encoded %s does not parse: %v", kind, err)
		}
		if back.Kind() != kind {
			t.Fatalf("re-encoded %s parsed as %s", kind, back.Kind())
		}
	})
}
