package aep

import (
	"math/rand/v2"
	"regexp"
	"testing"
	"time"
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
	"2026-07-03T10:15:04.221Z", "2026-07-03T10:15:04Z", "2026-07-03T10:15:04.Z", "2026-07-03T10:15:04,221Z",
	"2026-07-03t10:15:04Z", "2026-07-03T10:15:04z", "2026-07-03T10:15:04+05:30", "2026-07-03T10:15:04-23:59",
	"2026-07-03T10:15:04+24:00", "2026-07-03T10:15:04+05:60", "2026-07-03T10:15:04+0530", "2026-07-03T24:00:00Z",
	"2026-07-03T23:59:60Z", "2026-02-29T00:00:00Z", "2024-02-29T00:00:00Z", "2000-02-29T00:00:00Z", "1900-02-29T00:00:00Z",
	"2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z", "2026-00-01T00:00:00Z", "2026-01-00T00:00:00Z", "0000-01-01T00:00:00Z",
	"2026-07-03T10:15:04.1234567890123Z", "2026-07-03 10:15:04Z", "2026-7-03T10:15:04Z", "+026-07-03T10:15:04Z",
	"2026-07-03T10:15:04", "2026-07-03T10:15:04.221", "2026-07-03T10:15:04.221+01:00", "2026-07-03T1:15:04Z",
}

// The hand time check takes the forms events carry (or the fast path would
// never run), and checkGrammars holds ValidTime to time.Parse.
func TestPlainTime(t *testing.T) {
	t.Parallel()
	for _, s := range []string{FormatTime(time.Now()), "2026-07-03T10:15:04Z", "2024-02-29T23:59:59.999999999+05:30", "2026-12-31T00:00:00-00:00"} {
		if !plainTime(s) {
			t.Errorf("plainTime(%q) = false", s)
		}
	}
}

func TestGrammarsAgreeWithOracle(t *testing.T) {
	t.Parallel()
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
	_, err := time.Parse(time.RFC3339Nano, s)
	if got, want := ValidTime(s), err == nil; got != want || plainTime(s) && !want {
		t.Errorf("ValidTime(%q) = %v (plainTime %v), time.Parse says %v", s, got, plainTime(s), want)
	}
}

// The word-at-a-time checks against their byte-at-a-time definitions: every
// byte value at every position among bytes that pass, and random words.
func TestWordChecks(t *testing.T) {
	t.Parallel()
	hex := func(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }
	check := func(w string) {
		t.Helper()
		wantHex, wantBelow := true, false
		for i := 0; i < 8; i++ {
			wantHex = wantHex && hex(w[i])
			wantBelow = wantBelow || w[i] <= ' '
		}
		if got := lowerHex8(le64(w, 0)); got != wantHex {
			t.Fatalf("lowerHex8(%q) = %v", w, got)
		}
		if got := below8(le64(w, 0), ' '+1) != 0; got != wantBelow {
			t.Fatalf("below8(%q, 0x21) = %v", w, got)
		}
	}
	for pos := range 8 {
		for c := range 256 {
			w := []byte("0123abcf")
			w[pos] = byte(c)
			check(string(w))
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 1_000_000 {
		var b [8]byte
		for i := range b {
			b[i] = "0123456789abcdef"[r.IntN(16)]
			if r.IntN(8) == 0 {
				b[i] = byte(r.IntN(256))
			}
		}
		check(string(b[:]))
	}
}
