package cli

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
)

// testProgram is a two-command program recording what ran.
func testProgram(out, errb *bytes.Buffer, ran *[]string) Program {
	record := func(name string, v *string) Run {
		return func(_ context.Context, args []string) int {
			*ran = append(*ran, name+":"+*v+":"+strings.Join(args, ","))
			return 7
		}
	}
	return Program{Name: "prog", Out: out, Err: errb, Commands: []Command{
		{
			Name: "send", Summary: "send a thing", Forms: []string{"[--to X] ITEM [NOTE]"},
			About: "Sends ITEM.", Env: []string{"A_VAR", "B_VAR"}, Exit: "Exit 7 always.",
			Examples: []string{"prog send --to y item"}, Args: Args{Min: 1, Max: 2},
			Flags: func(fs *flag.FlagSet) Run {
				to := fs.String("to", "here", "where to")
				return record("send", to)
			},
		},
		{
			Name: "pick", Summary: "pick a kind", Interspersed: true, Args: Exactly(1),
			Forms: []string{"AGENT [--flag]"},
			Flags: func(fs *flag.FlagSet) Run {
				f := fs.String("flag", "", "a flag")
				return record("pick", f)
			},
		},
		{
			Name: "mode", Summary: "has modes", About: "Two modes.",
			Modes: []Command{
				{Name: "a", Forms: []string{"[--x N] [FILE...]", "--long\nsecond line"}, Args: AnyArgs,
					Flags: func(fs *flag.FlagSet) Run { x := fs.String("x", "1", "x"); return record("mode a", x) }},
				{Name: "b", Forms: []string{""}, Args: NoArgs},
			},
		},
	}}
}

func TestMainDispatchesAndCounts(t *testing.T) {
	cases := []struct {
		args []string
		code int
		ran  string
	}{
		{[]string{"send", "--to", "there", "item"}, 7, "send:there:item"},
		{[]string{"send", "item", "note"}, 7, "send:here:item,note"},
		{[]string{"send", "item", "--to"}, 7, "send:here:item,--to"}, // flags first, unless Interspersed
		{[]string{"pick", "kimi", "--flag", "v"}, 7, "pick:v:kimi"},
		{[]string{"mode", "a", "--x", "2", "f1", "f2"}, 7, "mode a:2:f1,f2"},
		{[]string{"mode", "b"}, 0, ""},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		var ran []string
		code := testProgram(&out, &errb, &ran).Main(context.Background(), c.args)
		if code != c.code || strings.Join(ran, ";") != c.ran || errb.Len() != 0 {
			t.Errorf("%v: exit %d ran %q stderr %q; want %d %q", c.args, code, ran, errb.String(), c.code, c.ran)
		}
	}
}

func TestMistakesAreOneLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{}, "prog: missing command (run prog --help for the list)"},
		{[]string{"nope"}, `prog: unknown command "nope"`},
		{[]string{"send"}, "prog send: missing argument: prog send [--to X] ITEM [NOTE]"},
		{[]string{"send", "a", "b", "c"}, `prog send: unexpected argument "c"`},
		{[]string{"send", "--bogus", "a"}, "prog send: flag provided but not defined: -bogus"},
		{[]string{"pick", "kimi", "--flag"}, "prog pick: flag needs an argument: -flag"},
		{[]string{"mode"}, "prog mode: missing mode: a or b"},
		{[]string{"mode", "c"}, `prog mode: unknown mode "c" (want a or b)`},
	} {
		var out, errb bytes.Buffer
		var ran []string
		code := testProgram(&out, &errb, &ran).Main(context.Background(), c.args)
		msg := errb.String()
		if code != ExitUsage || len(ran) != 0 || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, c.want) {
			t.Errorf("%v: exit %d ran %q stderr %q; want 2 and one line starting %q", c.args, code, ran, msg, c.want)
		}
	}
}

func TestUsageIsGenerated(t *testing.T) {
	help := func(args ...string) string {
		var out, errb bytes.Buffer
		var ran []string
		if code := testProgram(&out, &errb, &ran).Main(context.Background(), args); code != 0 || errb.Len() != 0 || len(ran) != 0 {
			t.Fatalf("%v: exit %d stderr %q ran %q", args, code, errb.String(), ran)
		}
		return out.String()
	}
	top := help("--help")
	for _, want := range []string{"usage: prog <command>", "  send  send a thing", "  pick  pick a kind", "  mode  has modes"} {
		if !strings.Contains(top, want) {
			t.Errorf("top-level help lacks %q:\n%s", want, top)
		}
	}
	want := `usage: prog send [--to X] ITEM [NOTE]

Sends ITEM.

Environment: A_VAR, B_VAR.

Exit 7 always.

Examples:
  prog send --to y item

Flags:
  -to string
    	where to (default "here")
`
	if got := help("send", "-h"); got != want {
		t.Errorf("send -h:\n%s\nwant:\n%s", got, want)
	}
	want = `usage: prog mode a [--x N] [FILE...]
       prog mode a --long
                   second line
       prog mode b

Two modes.

Run 'prog mode MODE -h' for a mode's flags.
`
	if got := help("mode", "--help"); got != want {
		t.Errorf("mode --help:\n%s\nwant:\n%s", got, want)
	}
	if got := help("mode", "a", "-h"); !strings.Contains(got, "-x string") {
		t.Errorf("mode a -h has no flags:\n%s", got)
	}
}

func TestEnvironmentWraps(t *testing.T) {
	var b bytes.Buffer
	writeWrapped(&b, "Environment: ", "  ", strings.Repeat("SOME_LONG_VARIABLE, ", 12))
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if len(line) > usageWidth {
			t.Errorf("line of %d > %d: %q", len(line), usageWidth, line)
		}
	}
	if n := strings.Count(b.String(), "\n"); n < 3 {
		t.Errorf("wrapped into %d lines:\n%s", n, b.String())
	}
}

// TestVersionFlag: --version prints the program's version line on stdout
// and exits 0, before any command; without a Version it stays an unknown
// command.
func TestVersionFlag(t *testing.T) {
	for _, arg := range []string{"--version", "-version"} {
		var out, errb bytes.Buffer
		var ran []string
		p := testProgram(&out, &errb, &ran)
		p.Version = func() string { return "prog 1.2.3 (stamped)" }
		if code := p.Main(context.Background(), []string{arg}); code != 0 || out.String() != "prog 1.2.3 (stamped)\n" || errb.Len() != 0 || len(ran) != 0 {
			t.Errorf("%s: exit %d stdout %q stderr %q ran %q", arg, code, out.String(), errb.String(), ran)
		}
		var help bytes.Buffer
		p.Usage(&help)
		if !strings.Contains(help.String(), "'prog --version'") {
			t.Errorf("the top-level help does not mention --version:\n%s", help.String())
		}
		out.Reset()
		errb.Reset()
		p.Version = nil
		if code := p.Main(context.Background(), []string{arg}); code != ExitUsage || out.Len() != 0 {
			t.Errorf("%s without a Version: exit %d stdout %q", arg, code, out.String())
		}
	}
}
