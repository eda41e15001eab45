package relay

import (
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
)

// Every event of the golden corpus the index can hold comes back from its
// index header exactly as parsing its bytes makes it.
func TestIndexHeaderRoundTrip(t *testing.T) {
	t.Parallel()
	dir := fixtures.Require(t)
	n := 0
	for _, l := range fixtures.Lines(t, dir, "fixtures/golden/golden.jsonl") {
		ev, err := aep.ParseEvent(l)
		if err != nil {
			t.Fatal(err)
		}
		want, err := NewMessage(ev, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if want.Kind == KindAgent {
			continue
		}
		v, ok := indexValue(want)
		if !ok {
			t.Fatalf("%s %s: no index header", ev.Type, ev.ID)
		}
		got, ok := messageFromIndex(v, want.Raw)
		if !ok {
			t.Fatalf("%s: header %q does not read back", ev.ID, v)
		}
		sameIndexFields(t, got, want)
		n++
	}
	if n < 50 {
		t.Fatalf("only %d golden events checked", n)
	}
}

func sameIndexFields(t *testing.T, got, want *Message) {
	t.Helper()
	if got.Type != want.Type || got.ID != want.ID || got.Source != want.Source || got.Pos != want.Pos ||
		got.Kind != want.Kind || got.Severity != want.Severity || got.Capture != want.Capture || string(got.Raw) != string(want.Raw) {
		t.Fatalf("from the header %+v\nfrom the bytes %+v", got, want)
	}
}

// Strings a header cannot carry unambiguously get no header (the rebuild
// parses those events), and malformed headers are refused, never guessed.
func TestIndexHeaderRefusals(t *testing.T) {
	t.Parallel()
	base := &Message{Type: "tool.completed", ID: "01J", Source: "aep://x/s", Kind: KindSession}
	for name, mod := range map[string]func(m *Message){
		"space in id":       func(m *Message) { m.ID = "a b" },
		"newline in source": func(m *Message) { m.Source = "a\nb" },
		"non-ascii source":  func(m *Message) { m.Source = "aep://hôte/s" },
		"empty id":          func(m *Message) { m.ID = "" },
	} {
		m := *base
		mod(&m)
		if v, ok := indexValue(&m); ok {
			t.Errorf("%s: got header %q", name, v)
		}
	}
	for _, v := range []string{
		"", "0 1 info metadata tool.completed 01J", "0 1 info metadata tool.completed 01J aep://x/s extra",
		"0 1 loud metadata tool.completed 01J aep://x/s", "0 1 info most tool.completed 01J aep://x/s",
		"0 x info metadata tool.completed 01J aep://x/s", "-1 1 info metadata tool.completed 01J aep://x/s",
		"0 1 info metadata agent.heartbeat 01J aep://x/s", "0 1 info metadata control.pause 01J aep://x/s",
		"0  1 info metadata tool.completed 01J aep://x/s",
	} {
		if m, ok := messageFromIndex(v, nil); ok {
			t.Errorf("header %q read as %+v", v, m)
		}
	}
}

// FuzzIndexHeader: any header either reads back as a message whose own
// header is the input, or is refused; it never panics.
func FuzzIndexHeader(f *testing.F) {
	f.Add("0 42 notice metadata tool.completed 01JX aep://host/s1")
	f.Add("3 0 info full session.started id-1 kimi-code://h/s")
	f.Add("0 - info metadata control.attention.respond c1 aep://sender")
	f.Fuzz(func(t *testing.T, v string) {
		m, ok := messageFromIndex(v, nil)
		if !ok {
			return
		}
		again, ok := indexValue(m)
		if !ok {
			t.Fatalf("%q read back but renders no header", v)
		}
		m2, ok := messageFromIndex(again, nil)
		if !ok || m2.Type != m.Type || m2.ID != m.ID || m2.Source != m.Source || m2.Pos != m.Pos || m2.Kind != m.Kind {
			t.Fatalf("%q -> %q does not read back the same", v, again)
		}
		if strings.ContainsAny(again, "\r\n") {
			t.Fatalf("header %q carries a line break", again)
		}
	})
}
