package aep

import (
	"regexp"
	"testing"
)

// The grammars as regular expressions: the oracle the hand-written
// matchers must agree with.
var (
	typeOracle    = regexp.MustCompile(`^((agent|session|run|progress|tool|delegation|attention|resource|error|state|assessment|message|control)(\.[a-z0-9_]+)+|x\.[a-z0-9_-]+\.[a-z0-9_]+(\.[a-z0-9_]+)+)$`)
	uriOracle     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:[^\s]*$`)
	traceOracle   = regexp.MustCompile(`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)
	foreignOracle = regexp.MustCompile(`^(control\.attention\.respond|control\.cancel|control\.pause|control\.resume|x\.[a-z0-9_-]+\.control\..+|attention\.routed)$`)
)

var grammarCases = []string{
	"", ".", "..", "tool", "tool.", "tool.completed", "tool..completed", "tool.completed.", "tool.Completed",
	"tool.completed_2", "tool.a.b.c", "Tool.completed", "tools.completed", "agent.heartbeat", "control.cancel",
	"control.attention.respond", "control.attention.respond.x", "control.pause", "control.resume", "control.",
	"attention.routed", "attention.routed\n", "x.acme.tool.done", "x.acme.tool", "x.ac-me.tool.done", "x.acme.to-ol.done",
	"x..tool.done", "x.acme..done", "x.acme.control.stop", "x.acme.control.", "x.acme.control.a\nb", "x.acme.control.a.b",
	"x.ACME.control.stop", "x.acme.control.\xff", "x.acme.control.\r", "x-acme.control.stop", "x.acme.tool.done\n",
	"aep://host/agent/kimi-code/session/s1", "aep:", ":x", "a:b c", "a:b\tc", "a:b\vc", "a:b\fc", "1a:b", "a1+.-:x",
	"a_b:x", "urn:uuid:1", "a:\xff\xfe", "a b:c", "mailto:x@y", "tool.completed ", " tool.completed",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\n",
	"00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
	"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g", "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	"0-04bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "ff-ffffffffffffffffffffffffffffffff-ffffffffffffffff-ff",
}

func TestGrammarsAgreeWithOracle(t *testing.T) {
	for _, s := range grammarCases {
		checkGrammars(t, s)
	}
}

func FuzzGrammars(f *testing.F) {
	for _, s := range grammarCases {
		f.Add(s)
	}
	f.Fuzz(checkGrammars)
}

func checkGrammars(t *testing.T, s string) {
	if got, want := ValidType(s), typeOracle.MatchString(s); got != want {
		t.Errorf("ValidType(%q) = %v, the grammar says %v", s, got, want)
	}
	if got, want := validURI(s), uriOracle.MatchString(s); got != want {
		t.Errorf("validURI(%q) = %v, the grammar says %v", s, got, want)
	}
	if got, want := validTraceparent(s), traceOracle.MatchString(s); got != want {
		t.Errorf("validTraceparent(%q) = %v, the grammar says %v", s, got, want)
	}
	if got, want := isForeignType(s), foreignOracle.MatchString(s); got != want {
		t.Errorf("isForeignType(%q) = %v, the grammar says %v", s, got, want)
	}
}
