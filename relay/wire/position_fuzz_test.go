package wire_test

import (
	"encoding/json"
	"testing"

	"github.com/aep-kimi/aep-kimi/relay/wire"
)

func FuzzParseFrom(f *testing.F) {
	for _, s := range []string{
		``, `all`, `"all"`, `null`, `[]`,
		`[{"session":"s","epoch":0,"seq":1}]`,
		`[{"session":"s","seq":3.0},{"session":"s","seq":4}]`,
		`[{"session":"s"}]`, `[{"session":"","seq":1}]`, `[{"session":"s","seq":-1}]`,
		`[{"session":"s","seq":1e3}]`, `[{"session":"s","seq":9223372036854775808}]`,
		`{}`, `[1]`, `["all"]`, `[{"session":1,"seq":1}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		from, err := wire.ParseFrom(b)
		if err != nil {
			if from.All || len(from.Positions) > 0 {
				t.Fatal("an error with a result")
			}
			return
		}
		if from.All && len(from.Positions) > 0 {
			t.Fatal("all with positions")
		}
		seen := map[string]bool{}
		for _, p := range from.Positions {
			if p.Session == "" || p.Epoch < 0 || p.Seq < 0 || seen[p.Session] {
				t.Fatalf("bad position %+v in %q", p, b)
			}
			seen[p.Session] = true
		}
		if from.All {
			return
		}
		// What it accepted round-trips.
		again, err := json.Marshal(from.Positions)
		if err != nil {
			t.Fatal(err)
		}
		back, err := wire.ParseFrom(again)
		if err != nil || len(back.Positions) != len(from.Positions) {
			t.Fatalf("round trip of %s: %v", again, err)
		}
		for i := range back.Positions {
			if back.Positions[i] != from.Positions[i] {
				t.Fatalf("round trip changed %+v to %+v", from.Positions[i], back.Positions[i])
			}
		}
	})
}

func FuzzParseEventID(f *testing.F) {
	for _, s := range []string{"s:0:1", "a:b:c:2:3", ":0:1", "s:-1:2", "s:1", "s:0:99999999999999999999", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		r, err := wire.ParseEventID(id)
		if err != nil {
			return
		}
		if r.Session == "" || r.Epoch < 0 || r.Seq < 0 {
			t.Fatalf("%q parsed to %+v", id, r)
		}
		if got := wire.EventID(r.Session, r.Position); got != id {
			// Leading zeros or a plus sign are accepted; the canonical
			// form must parse back to the same position.
			back, err := wire.ParseEventID(got)
			if err != nil || back != r {
				t.Fatalf("%q -> %+v -> %q -> %+v (%v)", id, r, got, back, err)
			}
		}
	})
}
