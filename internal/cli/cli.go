// Package cli runs a program's commands from a table: each command is data
// (name, summary, usage forms, what it does, environment, exit codes,
// examples, flags and what runs), registered once; parsing, dispatch and
// every usage text (the top-level help and each command's -h) are generated
// from that table, so the help cannot drift from the flags.
//
// Exit codes: -h prints the usage on stdout and exits 0; a usage mistake (a
// bad flag, a wrong argument count, an unknown command or mode) prints one
// line on stderr and exits 2. Everything else is the command's own.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// ExitUsage is the exit code of a usage mistake.
const ExitUsage = 2

// usageWidth is where the environment list wraps.
const usageWidth = 100

// Run runs a command once its flags are parsed: args are the positional
// arguments, already counted against the command's Args.
type Run func(ctx context.Context, args []string) int

// Command is one command of a program.
type Command struct {
	Name    string
	Summary string // one line in the top-level help
	// Forms are the usage lines after "PROG NAME ", one per way to call the
	// command; a newline continues a long one.
	Forms []string
	About string // what the command does: paragraphs under the usage lines
	// Env names the environment the command reads besides the variables
	// its flags name as their defaults.
	Env []string
	// Exit says the exit codes when there are more than 0 ok, 1 failure,
	// 2 usage.
	Exit     string
	Examples []string
	Args     Args
	// Interspersed lets flags follow positional arguments.
	Interspersed bool
	// Flags registers the command's flags on fs and returns what runs once
	// they are parsed.
	Flags func(fs *flag.FlagSet) Run
	// Modes, when set, are sub-commands picked by the first argument; the
	// command itself then has no flags.
	Modes []Command
}

// Args bounds a command's positional arguments; Max < 0 is any number.
type Args struct{ Min, Max int }

// Common argument counts.
var (
	NoArgs  = Args{Min: 0, Max: 0}
	AnyArgs = Args{Min: 0, Max: -1}
)

// Exactly is n positional arguments.
func Exactly(n int) Args { return Args{Min: n, Max: n} }

// Program is a binary's table of commands.
type Program struct {
	Name     string
	Commands []Command
	// Out and Err receive the usage texts and the usage mistakes.
	Out, Err io.Writer
	// Version, when set, is the line --version prints.
	Version func() string
}

// Main dispatches args[0] to its command; -h prints the top-level help.
func (p Program) Main(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprintf(p.Err, "%s: missing command (run %s --help for the list)\n", p.Name, p.Name)
		return ExitUsage
	}
	if IsHelp(args[0]) {
		p.Usage(p.Out)
		return 0
	}
	if p.Version != nil && IsVersion(args[0]) {
		fmt.Fprintln(p.Out, p.Version())
		return 0
	}
	for _, c := range p.Commands {
		if c.Name == args[0] {
			return p.dispatch(ctx, c, c.Name, args[1:])
		}
	}
	fmt.Fprintf(p.Err, "%s: unknown command %q (run %s --help)\n", p.Name, args[0], p.Name)
	return ExitUsage
}

// dispatch parses args for c, whose full name (e.g. "export otlp") is
// path, and runs it.
func (p Program) dispatch(ctx context.Context, c Command, path string, args []string) int {
	if len(c.Modes) > 0 {
		return p.dispatchMode(ctx, c, path, args)
	}
	fs := c.FlagSet(p.Name + " " + path)
	run := Run(nil)
	if c.Flags != nil {
		run = c.Flags(fs)
	}
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				c.usage(p.Out, p.Name, path, fs)
				return 0
			}
			return p.mistake(path, "%v", err)
		}
		args = fs.Args()
		if !c.Interspersed || len(args) == 0 {
			positional = append(positional, args...)
			break
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
	n := len(positional)
	switch {
	case c.Args.Max >= 0 && n > c.Args.Max:
		return p.mistake(path, "unexpected argument %q", positional[c.Args.Max])
	case n < c.Args.Min:
		form := ""
		if len(c.Forms) > 0 {
			form = ": " + p.Name + " " + path + " " + strings.ReplaceAll(c.Forms[0], "\n", " ")
		}
		return p.mistake(path, "missing argument%s", form)
	}
	if run == nil {
		return 0
	}
	return run(ctx, positional)
}

func (p Program) dispatchMode(ctx context.Context, c Command, path string, args []string) int {
	if len(args) == 0 {
		return p.mistake(path, "missing mode: %s", c.modeNames())
	}
	if IsHelp(args[0]) {
		c.usage(p.Out, p.Name, path, nil)
		return 0
	}
	for _, m := range c.Modes {
		if m.Name == args[0] {
			return p.dispatch(ctx, m, path+" "+m.Name, args[1:])
		}
	}
	return p.mistake(path, "unknown mode %q (want %s)", args[0], c.modeNames())
}

// FlagSet is an empty flag set for c that prints nothing itself: the
// dispatcher prints one line of its own for a mistake, and the usage on -h.
func (c Command) FlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

func (c Command) modeNames() string {
	names := make([]string, len(c.Modes))
	for i, m := range c.Modes {
		names[i] = m.Name
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// mistake prints a usage mistake as one line and returns ExitUsage.
func (p Program) mistake(path, format string, a ...any) int {
	fmt.Fprintf(p.Err, "%s %s: %s (see %s %s -h)\n", p.Name, path, fmt.Sprintf(format, a...), p.Name, path)
	return ExitUsage
}

// IsHelp reports an argument that asks for the usage.
func IsHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// IsVersion reports an argument that asks for the version line.
func IsVersion(arg string) bool { return arg == "--version" || arg == "-version" }

// Usage writes the top-level help: every command with its summary.
func (p Program) Usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", p.Name)
	width := 0
	for _, c := range p.Commands {
		width = max(width, len(c.Name))
	}
	for _, c := range p.Commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.Name, c.Summary)
	}
	fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's flags", p.Name)
	if p.Version != nil {
		fmt.Fprintf(w, ", '%s --version' for its version", p.Name)
	}
	fmt.Fprintln(w, ".")
}

// usage writes a command's usage: its forms, what it does, environment,
// exit codes, examples and flags (fs nil: the modes' forms instead).
func (c Command) usage(w io.Writer, prog, path string, fs *flag.FlagSet) {
	type form struct{ head, rest string }
	var forms []form
	for _, f := range c.Forms {
		forms = append(forms, form{prog + " " + path + " ", f})
	}
	for _, m := range c.Modes {
		for _, f := range m.Forms {
			forms = append(forms, form{prog + " " + path + " " + m.Name + " ", f})
		}
	}
	lead := "usage: "
	for _, f := range forms {
		// A form's further lines line up under its first flag.
		indent := "\n" + strings.Repeat(" ", len(lead)+len(f.head))
		fmt.Fprintln(w, strings.TrimRight(lead+f.head+strings.ReplaceAll(f.rest, "\n", indent), " "))
		lead = "       "
	}
	para := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			fmt.Fprintf(w, "\n%s\n", s)
		}
	}
	para(c.About)
	if len(c.Env) > 0 {
		fmt.Fprintln(w)
		writeWrapped(w, "Environment: ", "  ", strings.Join(c.Env, ", ")+".")
	}
	para(c.Exit)
	if len(c.Examples) > 0 {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, e := range c.Examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	if len(c.Modes) > 0 {
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
