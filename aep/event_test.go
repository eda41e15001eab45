package aep

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestParseEventRoundTrip(t *testing.T) {
	t.Parallel()
	in := `{"aep":"0.1","id":"01A","type":"tool.completed","subject":"Bash","time":"2026-07-03T10:15:04.221Z",` +
		`"source":"aep://h/agent/a/session/s1","agent":"a","session":"s1","seq":3,"epoch":0,` +
		`"acmeregion":"eu-1","acmeflag":true,"acmecount":7,"data":{"z":1,"a":{"n":[1,2.5,"x"]},"tool":{"name":"Bash"}}}`
	e, err := ParseEvent([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Raw()) != in {
		t.Fatalf("Raw changed: %s", e.Raw())
	}
	if e.Seq == nil || *e.Seq != 3 || e.Epoch == nil || *e.Epoch != 0 {
		t.Fatalf("seq/epoch: %v %v", e.Seq, e.Epoch)
	}
	if got := string(e.Ext["acmeregion"]); got != `"eu-1"` {
		t.Fatalf("ext: %s", got)
	}
	out, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	// Re-serialized, the event is the same JSON value: unknown extension
	// attributes and data survive unchanged.
	a, _ := CanonicalRaw([]byte(in))
	b, _ := CanonicalRaw(out)
	if !bytes.Equal(a, b) {
		t.Fatalf("round trip changed the event:\n%s\n%s", a, b)
	}
	if bytes.Contains(out, []byte("null")) {
		t.Fatalf("absent attributes must be omitted: %s", out)
	}
}

func TestMarshalOmitsAbsent(t *testing.T) {
	t.Parallel()
	e := &Event{AEP: Version, ID: "x", Type: "run.started", Time: "2026-07-03T10:00:00Z", Source: "aep://h", Agent: "a", Session: "s", Seq: Int64(0)}
	b, _ := e.MarshalJSON()
	want := `{"aep":"0.1","id":"x","type":"run.started","time":"2026-07-03T10:00:00Z","source":"aep://h","agent":"a","session":"s","seq":0}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

func TestParseEventRejects(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"empty":          ``,
		"array":          `[1]`,
		"not json":       `{"aep":`,
		"null attribute": `{"aep":"0.1","subject":null}`,
		"seq string":     `{"seq":"5"}`,
		"seq fraction":   `{"seq":1.5}`,
		"data array":     `{"data":[1]}`,
		"id number":      `{"id":5}`,
		"trailing":       `{"id":"a"} {"id":"b"}`,
		"top null":       `null`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseEvent([]byte(in)); err == nil {
				t.Fatalf("accepted %s", in)
			}
		})
	}
}

func TestSetExtRefusesIllegal(t *testing.T) {
	t.Parallel()
	var e Event
	for _, c := range []struct {
		name string
		val  any
	}{{"type", "x"}, {"Bad", "x"}, {"waytoolongextensionname", "x"}, {"ok", map[string]any{}}, {"ok", 1.5}} {
		if err := e.SetExt(c.name, c.val); err == nil {
			t.Errorf("SetExt(%q, %v) accepted", c.name, c.val)
		}
	}
	if err := e.SetExt("kimispooled", true); err != nil {
		t.Fatal(err)
	}
	if string(e.Ext["kimispooled"]) != "true" {
		t.Fatalf("got %s", e.Ext["kimispooled"])
	}
}

func TestDigestOracle(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   any
		want string
	}{
		{map[string]any{"command": "echo oracle-test"}, "eef5fe32898c894ee12a2d389d4d8096"},
		{"oracle-test\n", "0e6ed1271cd74959ce2d21fed82aa351"},
		{json.RawMessage(`{ "command" : "echo probe" }`), "4dbce387a92df2c7996d0522a6e78340"},
	}
	for _, c := range cases {
		got, err := Digest(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("Digest(%v) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestCanonical(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		`{"b":1,"a":[true,null,"<&>"],"c":{"y":1.50,"x":1e-7}}`: `{"a":[true,null,"<&>"],"b":1,"c":{"x":1e-7,"y":1.5}}`,
		`"tab\tnl\nctl\u0001é"`:                                 `"tab\tnl\nctl\u0001é"`,
		`123456789012`:                                          `123456789012`,
		`1.0`:                                                   `1`,
		`1e21`:                                                  `1e+21`,
	}
	for in, want := range cases {
		got, err := CanonicalRaw([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("Canonical(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestFormatTime(t *testing.T) {
	t.Parallel()
	tm := time.Date(2026, 7, 3, 12, 15, 4, 221_900_000, time.FixedZone("x", 2*3600))
	if got := FormatTime(tm); got != "2026-07-03T10:15:04.221Z" {
		t.Fatalf("got %s", got)
	}
	if !ValidTime(FormatTime(tm)) {
		t.Fatal("own time invalid")
	}
}

func TestNewIDSortable(t *testing.T) {
	t.Parallel()
	a, b := NewID(), NewID()
	if len(a) != 26 || !(a < b) {
		t.Fatalf("ids not monotonic ULIDs: %s %s", a, b)
	}
}

func TestQuoteNoHTMLEscape(t *testing.T) {
	t.Parallel()
	if got := Quote("a<b>&\u2028"); !strings.Contains(got, "<b>&") {
		t.Fatalf("got %s", got)
	}
}

func TestMarshalEscapesIllegalExtensionNames(t *testing.T) {
	t.Parallel()
	e, err := ParseEvent([]byte(`{"aep":"0.1","a\"b":"x","ok":1}`))
	if err != nil {
		t.Fatal(err)
	}
	out, _ := e.MarshalJSON()
	if _, err := ParseEvent(out); err != nil {
		t.Fatalf("re-serialized event is not JSON: %s", out)
	}
}

func TestCoreIndexBytesAgrees(t *testing.T) {
	t.Parallel()
	for i, name := range coreAttrs {
		if got := coreIndexBytes([]byte(name)); got != i || coreIndex(name) != i {
			t.Errorf("%s: %d / %d, want %d", name, got, coreIndex(name), i)
		}
	}
	if coreIndexBytes([]byte("acme")) != -1 {
		t.Error("extension name read as core")
	}
}

func TestParseEventEscapesAndDuplicates(t *testing.T) {
	t.Parallel()
	e, err := ParseEvent([]byte("{ \"aep\" : \"0.1\", \"s\\u0075bject\":\"a\\\"b\\u00e9\", \"id\":\"1\", \"id\":\"2\",\n\"data\":{\"x\":[1,{\"y\":\"}\"}]} }"))
	if err != nil {
		t.Fatal(err)
	}
	if e.Subject != "a\"bé" || e.ID != "2" || string(e.Data) != `{"x":[1,{"y":"}"}]}` {
		t.Fatalf("subject %q id %q data %s", e.Subject, e.ID, e.Data)
	}
}

// stringAt, coreStrings and presentMask are stringAttr and Has by index:
// the same answers for every core attribute, parsed or built.
func TestAttrByIndex(t *testing.T) {
	t.Parallel()
	parsed, err := ParseEvent(benchLine)
	if err != nil {
		t.Fatal(err)
	}
	built := parsed.Clone()
	built.Subject, built.Seq = "", nil
	for _, e := range []*Event{parsed, built, {}} {
		strs, mask := e.coreStrings(), e.presentMask()
		for i, name := range coreAttrs {
			s1, ok1 := e.stringAt(i)
			s2, ok2 := e.stringAttr(name)
			has := mask&(1<<i) != 0
			if s1 != s2 || ok1 != ok2 || strs[i] != s2 || has != e.Has(name) {
				t.Errorf("%s: stringAt %q %v coreStrings %q mask %v, stringAttr %q %v Has %v", name, s1, ok1, strs[i], has, s2, ok2, e.Has(name))
			}
		}
	}
}

// Multiline tells the relay, without a scan, that an event must be
// compacted onto one line before it is framed.
func TestMultiline(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		`{"id":"a","data":{"x":"\n"}}`:        false, // an escape, not a line break
		"{\"id\":\"a\",\"data\":{\"x\":1}}":   false,
		"{\"id\":\"a\",\r\"data\":{}}":        true,
		"{\"id\":\"a\",\"data\":{\"x\":\n1}}": true,
		"\n{\"id\":\"a\"}\r\n":                false, // trimmed: Raw is one line
	} {
		e, err := ParseEvent([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		if e.Multiline() != want || e.Multiline() != bytes.ContainsAny(e.Raw(), "\r\n") {
			t.Errorf("%q: Multiline %v, want %v", in, e.Multiline(), want)
		}
		c := e.Clone()
		if b, err := c.Seal(); err != nil || c.Multiline() {
			t.Errorf("%q: sealed clone %q: Multiline %v (err %v)", in, b, c.Multiline(), err)
		}
	}
}
