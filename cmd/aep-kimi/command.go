package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// stdio is the process's standard streams, passed in so commands are
// testable without touching globals.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// runFunc runs a command once its flags are parsed: args are the positional
// arguments, already counted against the command's nargs.
type runFunc func(ctx context.Context, args []string, io stdio) int

// command is one aep-kimi command, as data. The table in main.go lists
// them once; the dispatcher parses their flags and counts their arguments,
// and their usage text (the top-level help and each -h) is generated from
// these fields, so it cannot drift from the flags.
type command struct {
	name    string
	summary string // one line in the top-level help
	// forms are the usage lines after "aep-kimi NAME ", one per way to
	// call the command; a newline continues a long one.
	forms []string
	about string // what the command does: paragraphs under the usage lines
	// env names the environment the command reads besides the variables
	// its flags name as their defaults.
	env []string
	// exit says the exit codes when there are more than 0 ok, 1 failure,
	// 2 usage.
	exit     string
	examples []string
	nargs    nargs
	// flags registers the command's flags on fs, reading their defaults
	// from getenv, and returns what runs once they are parsed.
	flags func(fs *flag.FlagSet, getenv func(string) string) runFunc
	// modes, when set, are sub-commands picked by the first argument
	// (export ce|otlp|ocsf); the command itself then has no flags.
	modes []command
}

// nargs bounds a command's positional arguments; max < 0 is any number.
type nargs struct{ min, max int }

var (
	noArgs  = nargs{0, 0}
	anyArgs = nargs{0, -1}
)

func exactly(n int) nargs { return nargs{n, n} }

// usageWidth is where usage lines wrap.
const usageWidth = 100

// prog is the binary's name in every usage line and message.
const prog = "aep-kimi"

// dispatch parses args for c (whose full name, e.g. "export otlp", is
// path) and runs it: -h prints the usage on stdout and exits 0; a bad flag
// or argument count is one line on stderr and exit 2.
func (c command) dispatch(ctx context.Context, path string, args []string, std stdio, getenv func(string) string) int {
	if len(c.modes) > 0 {
		return c.dispatchMode(ctx, path, args, std, getenv)
	}
	fs := flag.NewFlagSet(prog+" "+path, flag.ContinueOnError)
	// The flag package's own messages are swallowed: the dispatcher prints
	// one line of its own instead.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var run runFunc
	if c.flags != nil {
		run = c.flags(fs, getenv)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.usage(std.out, path, fs)
			return 0
		}
		return usageErr(std, path, "%v", err)
	}
	if n := fs.NArg(); n < c.nargs.min || (c.nargs.max >= 0 && n > c.nargs.max) {
		if c.nargs.max >= 0 && n > c.nargs.max {
			return usageErr(std, path, "unexpected argument %q", fs.Arg(c.nargs.max))
		}
		return usageErr(std, path, "missing argument: %s %s %s", prog, path, c.forms[0])
	}
	return run(ctx, fs.Args(), std)
}

func (c command) dispatchMode(ctx context.Context, path string, args []string, std stdio, getenv func(string) string) int {
	if len(args) == 0 {
		return usageErr(std, path, "missing mode: %s", c.modeNames())
	}
	if isHelp(args[0]) {
		c.usage(std.out, path, nil)
		return 0
	}
	for _, m := range c.modes {
		if m.name == args[0] {
			return m.dispatch(ctx, path+" "+m.name, args[1:], std, getenv)
		}
	}
	return usageErr(std, path, "unknown mode %q (want %s)", args[0], c.modeNames())
}

func (c command) modeNames() string {
	names := make([]string, len(c.modes))
	for i, m := range c.modes {
		names[i] = m.name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// usageErr prints a usage mistake as one line and returns exit code 2.
func usageErr(std stdio, path, format string, a ...any) int {
	fmt.Fprintf(std.err, "%s %s: %s (see %s %s -h)\n", prog, path, fmt.Sprintf(format, a...), prog, path)
	return 2
}

func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// usage writes the command's usage: its forms, what it does, environment,
// exit codes, examples and flags (fs nil: the modes' usage lines instead).
func (c command) usage(w io.Writer, path string, fs *flag.FlagSet) {
	type form struct{ head, rest string }
	var forms []form
	for _, f := range c.forms {
		forms = append(forms, form{prog + " " + path + " ", f})
	}
	for _, m := range c.modes {
		for _, f := range m.forms {
			forms = append(forms, form{prog + " " + path + " " + m.name + " ", f})
		}
	}
	lead := "usage: "
	for _, f := range forms {
		// A form's further lines line up under its first flag.
		indent := "\n" + strings.Repeat(" ", len(lead)+len(f.head))
		fmt.Fprintf(w, "%s%s%s\n", lead, f.head, strings.ReplaceAll(f.rest, "\n", indent))
		lead = "       "
	}
	para := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			fmt.Fprintf(w, "\n%s\n", s)
		}
	}
	para(c.about)
	if len(c.env) > 0 {
		fmt.Fprintln(w)
		writeWrapped(w, "Environment: ", "  ", strings.Join(c.env, ", ")+".")
	}
	para(c.exit)
	if len(c.examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if len(c.modes) > 0 {
		fmt.Fprintf(w, "\nRun '%s %s MODE -h' for a mode's flags.\n", prog, path)
		return
	}
	if fs != nil && hasFlags(fs) {
		fmt.Fprintf(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// writeWrapped writes text after first, breaking it at spaces so no line
// passes usageWidth; further lines start with indent.
func writeWrapped(w io.Writer, first, indent, text string) {
	line := first
	fresh := true
	for _, word := range strings.Fields(text) {
		if !fresh && len(line)+1+len(word) > usageWidth {
			fmt.Fprintln(w, line)
			line, fresh = indent, true
		}
		if !fresh {
			line += " "
		}
		line += word
		fresh = false
	}
	fmt.Fprintln(w, line)
}

// topUsage is the top-level help: every command with its summary.
func topUsage(w io.Writer, cmds []command) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", prog)
	width := 0
	for _, c := range cmds {
		width = max(width, len(c.name))
	}
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's flags.\n", prog)
}
