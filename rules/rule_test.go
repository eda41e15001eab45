package rules

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	set, err := Parse([]byte(`{
  "version": 1,
  "rules": [
    {"id": "ok", "effect": "allow", "tool": "Bash", "args": "echo *"},
    {"id": "rm", "effect": "allow", "tool": "Bash", "args": "rm *", "note": "cleanups"},
    {"id": "rmrf", "effect": "deny", "tool": "Bash", "args": "rm -rf *", "project": "~/src", "agent": "kimi-code"}
  ]
}`))
	if err != nil {
		t.Fatal(err)
	}
	if set.Len() != 3 || set.Rules()[2].Agent != "kimi-code" {
		t.Fatalf("parsed %+v", set.Rules())
	}
	round, err := Parse(Encode(set.Rules()))
	if err != nil || round.Len() != 3 {
		t.Fatalf("Encode does not parse back: %v", err)
	}
	for _, empty := range []string{"", "  \n"} {
		if s, err := Parse([]byte(empty)); err != nil || s.Len() != 0 {
			t.Fatalf("empty file: %v", err)
		}
	}
}

// Every refusal says where and why, in words a person can act on.
func TestParseRefuses(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"syntax", "{\n  \"version\": 1,\n  \"rules\": [\n    {\"id\": \"a\",}\n  ]\n}", "line 4 column"},
		{"unknown member", `{"version":1,"rules":[{"id":"a","effect":"allow","tool":"Bash","tools":"x"}]}`, `unknown field "tools"`},
		{"unknown top member", `{"version":1,"rules":[],"extra":true}`, `unknown field "extra"`},
		{"repeated member", `{"version":1,"rules":[{"id":"a","effect":"allow","effect":"deny","tool":"Bash"}]}`, `member "effect" appears twice`},
		{"wrong type", `{"version":1,"rules":[{"id":"a","effect":"allow","tool":["Bash"]}]}`, "rules.tool: a JSON array"},
		{"version missing", `{"rules":[]}`, "version 0: this relay reads version 1"},
		{"version future", `{"version":2,"rules":[]}`, "version 2"},
		{"trailing text", `{"version":1,"rules":[]} {}`, "text after the rules object"},
		{"not an object", `[]`, "a JSON array"},
		{"truncated", `{"version":1,"rules":[`, "ends inside"},
		{"id missing", `{"version":1,"rules":[{"effect":"allow","tool":"Bash"}]}`, "rule 1: id is missing"},
		{"id bad", `{"version":1,"rules":[{"id":"a b","effect":"allow","tool":"Bash"}]}`, `rule 1 ("a b"): id "a b"`},
		{"id twice", `{"version":1,"rules":[{"id":"a","effect":"allow","tool":"Bash"},{"id":"a","effect":"deny","tool":"Bash"}]}`, `rule 2 ("a"): id already used by rule 1`},
		{"effect bad", `{"version":1,"rules":[{"id":"a","effect":"allwo","tool":"Bash"}]}`, `effect "allwo": want allow, deny or ask`},
		{"effect missing", `{"version":1,"rules":[{"id":"a","tool":"Bash"}]}`, "effect is missing"},
		{"tool missing", `{"version":1,"rules":[{"id":"a","effect":"deny"}]}`, "tool is missing"},
		{"bad glob", `{"version":1,"rules":[{"id":"a","effect":"deny","tool":"Bash","args":"x\\"}]}`, `args "x\\": invalid pattern: ends in a lone backslash`},
		{"control in note", `{"version":1,"rules":[{"id":"a","effect":"deny","tool":"Bash","note":"a\u001b[31m"}]}`, "control characters"},
		{"long note", `{"version":1,"rules":[{"id":"a","effect":"deny","tool":"Bash","note":"` + strings.Repeat("n", MaxNoteRunes+1) + `"}]}`, "note is 501 characters"},
		{"not utf-8", "{\"version\":1,\"rules\":[{\"id\":\"a\",\"effect\":\"deny\",\"tool\":\"\xff\"}]}", "not valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.in))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse accepted it or failed without a ParseError: %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not say %q", err, c.want)
			}
		})
	}
	many := `{"version":1,"rules":[` + strings.Repeat(`{"id":"x","effect":"deny","tool":"Bash"},`, MaxRules) + `{"id":"y","effect":"deny","tool":"Bash"}]}`
	if _, err := Parse([]byte(many)); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Fatalf("too many rules: %v", err)
	}
}

// FuzzParse: any input parses or is refused with a ParseError, never a
// panic, and whatever parses encodes to a file that parses to the same
// rules.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"version":1,"rules":[{"id":"a","effect":"allow","tool":"Bash","args":"go test *","project":"~/src"}]}`))
	f.Add([]byte(`{"version":1,"rules":[]}`))
	f.Add([]byte(`{"version":1,"rules":[{"id":"a","effect":"deny","effect":"allow","tool":"x"}]}`))
	f.Add([]byte(`{"version":1,"rules":[{"id":"a","effect":"ask","tool":"*","agent":"k*","note":"n"}]} x`))
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := Parse(b)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("refusal without a ParseError: %v", err)
			}
			return
		}
		again, err := Parse(Encode(set.Rules()))
		if err != nil {
			t.Fatalf("re-encoded rules do not parse: %v", err)
		}
		a, b2 := set.Rules(), again.Rules()
		if len(a) != len(b2) {
			t.Fatalf("round trip lost rules: %d -> %d", len(a), len(b2))
		}
		for i := range a {
			if a[i] != b2[i] {
				t.Fatalf("round trip changed rule %d: %+v -> %+v", i, a[i], b2[i])
			}
		}
	})
}
