package rules

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/aep-kimi/aep-kimi/mapping"
)

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pattern, text string
		fold, want    bool
	}{
		{"go test *", "go test ./...", false, true},
		{"go test *", "go test", false, false},
		{"go test*", "go test", false, true},
		{"*", "", false, true},
		{"", "", false, true},
		{"", "x", false, false},
		{"?", "é", false, true},
		{"?", "", false, false},
		{"a*b*c", "aXbYc", false, true},
		{"a*b*c", "aXbY", false, false},
		{"*.go", "main.go.bak", false, false},
		{`\*`, "*", false, true},
		{`\*`, "x", false, false},
		{`a\\b`, `a\b`, false, true},
		{`\?x`, "?x", false, true},
		{"Bash", "bash", true, true},
		{"Bash", "bash", false, false},
		{"rm -rf *", "rm -rf ./build", false, true},
		{"rm *", "rm -rf ./build", false, true},
		{"*aaa*b", strings.Repeat("a", 500), false, false},
	}
	for _, c := range cases {
		p, err := Compile(c.pattern, c.fold)
		if err != nil {
			t.Fatalf("%q: %v", c.pattern, err)
		}
		if got := p.Match(c.text); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.text, got, c.want)
		}
		if got := oracle(p, c.text, false); got != c.want {
			t.Errorf("oracle(%q, %q) = %v: the test's oracle disagrees with the table", c.pattern, c.text, got)
		}
	}
}

// An allow rule's wildcard never stands for a shell operator: the classic
// way past a command allow-list is a second command after one it allows.
func TestGlobSafe(t *testing.T) {
	cases := []struct {
		pattern, text string
		want          bool
	}{
		{"echo *", "echo ok", true},
		{"echo *", "echo ok; rm -rf /", false},
		{"echo *", "echo ok && rm -rf /", false},
		{"echo *", "echo ok || rm -rf /", false},
		{"echo *", "echo ok | sh", false},
		{"echo *", "echo `rm -rf /`", false},
		{"echo *", "echo $(rm -rf /)", false},
		{"echo *", "echo ok > /etc/passwd", false},
		{"echo *", "echo ok < /etc/shadow", false},
		{"echo *", "echo ok " + mapping.LineBreak + " rm -rf /", false},
		{"echo *", "echo ok\nrm -rf /", false},
		{"echo *", "echo $HOME (and more)", true},
		{"echo ?(x)", "echo $(x)", false},
		{"echo $(*)", "echo $(date)", true},
		{"make * && make test", "make build && make test", true},
		{"make * && make test", "make build && make test; rm -rf /", false},
		{"echo ok", "echo ok", true},
		{"echo ok; ls", "echo ok; ls", true},
		{"*", "a;b", false},
		{"*;*", "a;b", true},
	}
	for _, c := range cases {
		p := MustCompile(c.pattern, false)
		if got := p.Safe(c.text); got != c.want {
			t.Errorf("Safe(%q, %q) = %v, want %v", c.pattern, c.text, got, c.want)
		}
		if got := oracle(p, c.text, true); got != c.want {
			t.Errorf("oracle(%q, %q, safe) = %v: the test's oracle disagrees with the table", c.pattern, c.text, got)
		}
	}
	if string(lineBreak) != mapping.LineBreak {
		t.Fatalf("the matcher's line break %q is not the mapping's %q", string(lineBreak), mapping.LineBreak)
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, src := range []string{`ends in \`, "tab\there", "nul\x00", string([]byte{0xff}), strings.Repeat("x", MaxPatternBytes+1)} {
		if _, err := Compile(src, false); !errors.Is(err, ErrPattern) {
			t.Errorf("Compile(%q) = %v, want ErrPattern", src, err)
		}
	}
}

func TestMatchDirAndHome(t *testing.T) {
	cases := []struct {
		pattern, dir string
		want         bool
	}{
		{"/home/ann/src/aep-kimi", "/home/ann/src/aep-kimi", true},
		{"/home/ann/src/aep-kimi", "/home/ann/src/aep-kimi/cmd/x", true},
		{"/home/ann/src/aep-kimi", "/home/ann/src/aep-kimi-fork", false},
		{"/home/ann/src/aep-kimi", "~/src/aep-kimi/cmd", true}, // the same place, as redacted capture writes it
		{"~/src/aep-kimi", "/home/ann/src/aep-kimi", true},
		{"~/src/aep-kimi", "/Users/ann/src/aep-kimi", true},
		{"~/src/aep-kimi", `C:\Users\ann\src\aep-kimi`, true},
		{"*/aep-kimi", "/srv/aep-kimi/x", true},
		{"/srv/*", "/srv", false},
		{"/", "/anything", true},
		{"/home/*/src", "/home/ann/src", true},
		{"/home/*/src", "~/src", false}, // a wildcard user cannot be folded
	}
	for _, c := range cases {
		r := Rule{ID: "p", Effect: Allow, Tool: "*", Project: c.pattern}
		cp, err := check(r, 0)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := cp.test(prepare(Request{Tool: "x", Project: c.dir, ProjectKnown: true}), false)
		if (got == Matched) != c.want {
			t.Errorf("project %q on %q: %s, want match=%v", c.pattern, c.dir, got, c.want)
		}
	}
}

// oracle is a plain dynamic-programming glob match, the definition the
// matcher must agree with: with safe, a wildcard never covers an operator
// position of the text, and a literal operator of the pattern (as the
// pattern itself judges it) matches only an operator of the text.
func oracle(p Pattern, text string, safe bool) bool {
	t := newText(text)
	if p.fold {
		t = lower(text)
	}
	s := t.rs
	toks := p.toks
	opText := make([]bool, len(s))
	for i := range s {
		opText[i] = safe && operator(s, i)
	}
	opPat := make([]bool, len(toks))
	if safe {
		for i, t := range toks {
			if t.kind != tokLit {
				continue
			}
			rs := []rune{t.r}
			if i > 0 && toks[i-1].kind == tokLit {
				rs = []rune{toks[i-1].r, t.r}
			}
			opPat[i] = operator(rs, len(rs)-1)
		}
	}
	dp := make([][]bool, len(toks)+1)
	for i := range dp {
		dp[i] = make([]bool, len(s)+1)
	}
	dp[0][0] = true
	for i := 1; i <= len(toks); i++ {
		t := toks[i-1]
		for j := 0; j <= len(s); j++ {
			switch t.kind {
			case tokStar:
				dp[i][j] = dp[i-1][j] || j > 0 && dp[i][j-1] && !opText[j-1]
			case tokOne:
				dp[i][j] = j > 0 && dp[i-1][j-1] && !opText[j-1]
			default:
				dp[i][j] = j > 0 && dp[i-1][j-1] && t.r == s[j-1] && opPat[i-1] == opText[j-1]
			}
		}
	}
	return dp[len(toks)][len(s)]
}

// FuzzGlob holds Match and Safe to the oracle over any pattern and text.
func FuzzGlob(f *testing.F) {
	for _, seed := range [][2]string{
		{"go test *", "go test ./..."}, {"echo *", "echo ok; rm -rf /"}, {"a*b?c", "aXXbYc"},
		{`\**`, "*x"}, {"*$(*)*", "a$(b)c"}, {"?(", "$("}, {"*", ""}, {"Bash", "BASH"},
	} {
		f.Add(seed[0], seed[1], false)
		f.Add(seed[0], seed[1], true)
	}
	f.Fuzz(func(t *testing.T, pattern, text string, fold bool) {
		if len(text) > 4096 || !utf8.ValidString(text) {
			return
		}
		p, err := Compile(pattern, fold)
		if err != nil {
			if !errors.Is(err, ErrPattern) {
				t.Fatalf("Compile(%q): error not ErrPattern: %v", pattern, err)
			}
			return
		}
		if got, want := p.Match(text), oracle(p, text, false); got != want {
			t.Fatalf("Match(%q, %q) = %v, oracle %v", pattern, text, got, want)
		}
		if got, want := p.Safe(text), oracle(p, text, true); got != want {
			t.Fatalf("Safe(%q, %q) = %v, oracle %v", pattern, text, got, want)
		}
		if p.Safe(text) && !p.Match(text) {
			t.Fatalf("Safe(%q, %q) holds where Match does not", pattern, text)
		}
	})
}
