// Package reftest writes the reference under docs/reference from the code
// (the command tables, the environment and file tables, the daemons'
// metric registries) and keeps it there: each binary's TestReference
// renders its part and compares it with the committed file, and -update
// rewrites it. The rendering is here so the three binaries' parts read
// alike.
package reftest

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/envtable"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
)

// Regenerate is the command that rewrites every generated reference file.
const Regenerate = "go test -short ./cmd/... -run TestReference -update"

// Banner opens every generated file.
const Banner = "<!-- Generated from the code by `" + Regenerate + "`; do not edit. -->\n"

// Command is one command as the reference shows it.
type Command struct {
	Path     string // e.g. "aep-kimi export otlp"
	Summary  string
	Forms    []string
	About    string
	Env      []string
	Exit     string
	Examples []string
	Flags    []Flag
	Modes    []Command // sub-commands, each with its own flags
}

// Flag is one flag: --Name Arg, its default and what it sets.
type Flag struct{ Name, Arg, Default, Usage string }

// FromTable is prog's command table as the reference shows it: each
// command (and each mode of one) with the flags its Flags function
// registers.
func FromTable(prog string, cmds []cli.Command) []Command {
	var conv func(path string, c cli.Command) Command
	conv = func(path string, c cli.Command) Command {
		d := Command{Path: path, Summary: c.Summary, Forms: c.Forms, About: c.About, Env: c.Env, Exit: c.Exit, Examples: c.Examples}
		for _, m := range c.Modes {
			d.Modes = append(d.Modes, conv(path+" "+m.Name, m))
		}
		if c.Flags != nil {
			fs := c.FlagSet(path)
			c.Flags(fs)
			d.Flags = FlagsOf(fs)
		}
		return d
	}
	out := make([]Command, len(cmds))
	for i, c := range cmds {
		out[i] = conv(prog+" "+c.Name, c)
	}
	return out
}

// FlagsOf is fs's flags in name order, as flag.PrintDefaults names them.
func FlagsOf(fs *flag.FlagSet) []Flag {
	var out []Flag
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		def := f.DefValue
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() && def == "false" {
			def = ""
		}
		if def == "0" || def == "0s" || def == "[]" {
			def = ""
		}
		out = append(out, Flag{Name: f.Name, Arg: arg, Default: def, Usage: usage})
	})
	return out
}

// Commands renders a binary's commands: a table of them, then each with its
// usage forms, what it does, its environment, exit codes and flags, and
// its modes under it.
func Commands(prog string, cmds []Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s\n\n| command | what |\n|---|---|\n", prog)
	for _, c := range cmds {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", c.Path, anchor(c.Path), Cell(c.Summary))
	}
	for _, c := range cmds {
		writeCommand(&b, "###", c)
	}
	return b.String()
}

func writeCommand(b *strings.Builder, level string, c Command) {
	fmt.Fprintf(b, "\n%s %s\n", level, c.Path)
	if s := strings.TrimSpace(c.Summary); s != "" {
		fmt.Fprintf(b, "\n%s\n", s)
	}
	if len(c.Forms) > 0 {
		b.WriteString("\n```\n")
		for _, f := range c.Forms {
			fmt.Fprintf(b, "%s\n", strings.TrimRight(c.Path+" "+strings.ReplaceAll(f, "\n", " "), " "))
		}
		b.WriteString("```\n")
	}
	for _, p := range []string{c.About, c.Exit} {
		if p = strings.TrimSpace(p); p != "" {
			fmt.Fprintf(b, "\n%s\n", p)
		}
	}
	if len(c.Env) > 0 {
		fmt.Fprintf(b, "\nEnvironment: %s.\n", "`"+strings.Join(c.Env, "`, `")+"`")
	}
	if len(c.Examples) > 0 {
		b.WriteString("\n```sh\n")
		for _, e := range c.Examples {
			fmt.Fprintf(b, "%s\n", e)
		}
		b.WriteString("```\n")
	}
	if len(c.Flags) > 0 {
		b.WriteString("\n| flag | default | what |\n|---|---|---|\n")
		for _, f := range c.Flags {
			name := "--" + f.Name
			if f.Arg != "" {
				name += " " + f.Arg
			}
			def := ""
			if f.Default != "" {
				def = Code(f.Default)
			}
			fmt.Fprintf(b, "| %s | %s | %s |\n", Code(name), def, Cell(f.Usage))
		}
	}
	for _, m := range c.Modes {
		writeCommand(b, level+"#", m)
	}
}

// anchor is the GitHub heading anchor of a "### text" heading.
func anchor(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Cell is s on one line, safe inside a Markdown table cell.
func Cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// Code is s as inline code in a table cell.
func Code(s string) string {
	s = Cell(s)
	if strings.Contains(s, "`") {
		return "``" + s + "``"
	}
	return "`" + s + "`"
}

// File is the path of a reference file, name under docs/reference.
func File(t testing.TB, name string) string {
	t.Helper()
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "docs", "reference", name)
}

// Golden compares got with the file at path, or rewrites it when update
// is set.
func Golden(t testing.TB, path, got string, update bool) {
	t.Helper()
	if update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run `%s` to write it", err, Regenerate)
	}
	if string(want) != got {
		t.Errorf("%s is out of date with the code: run `%s` and read the diff before committing it\n%s",
			path, Regenerate, firstDiff(string(want), got))
	}
}

// Section is Golden for the part of the file at path between name's
// markers, the file's other parts belonging to other tests (other
// binaries). order is every section's name in file order, so a section
// written for the first time lands in its place; head opens a file written
// for the first time. The update is made under a lock on the file:
// `go test ./cmd/...` runs the binaries' tests at once.
func Section(t testing.TB, path, head, name string, order []string, got string, update bool) {
	t.Helper()
	begin, end := marker("begin", name), marker("end", name)
	if !update {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v: run `%s` to write it", err, Regenerate)
		}
		i, j := strings.Index(string(data), begin), strings.Index(string(data), end)
		if i < 0 || j < i {
			t.Fatalf("%s has no %s section: run `%s`", path, name, Regenerate)
		}
		if k := strings.Index(string(data), "<!-- begin "); string(data[:max(k, 0)]) != head {
			t.Errorf("%s's head is out of date with the code: run `%s`", path, Regenerate)
		}
		if have := string(data[i+len(begin) : j]); have != got {
			t.Errorf("%s's %s section is out of date with the code: run `%s` and read the diff before committing it\n%s",
				path, name, Regenerate, firstDiff(have, got))
		}
		return
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := safefile.Lock(f); err != nil {
		t.Fatal(err)
	}
	defer safefile.Unlock(f) //nolint:errcheck // closing releases it too
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if text == "" {
		text = head
	}
	if k := strings.Index(text, "<!-- begin "); k >= 0 {
		text = head + text[k:]
	}
	text = replaceSection(text, name, order, got)
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(text), 0); err != nil {
		t.Fatal(err)
	}
}

func marker(which, name string) string { return "<!-- " + which + " " + name + " -->\n" }

// replaceSection puts body between name's markers in text, adding them
// before the first later section's (by order) or at the end.
func replaceSection(text, name string, order []string, body string) string {
	begin, end := marker("begin", name), marker("end", name)
	if i, j := strings.Index(text, begin), strings.Index(text, end); i >= 0 && j > i {
		return text[:i+len(begin)] + body + text[j:]
	}
	at := len(text)
	later := false
	for _, o := range order {
		if o == name {
			later = true
			continue
		}
		if i := strings.Index(text, marker("begin", o)); later && i >= 0 {
			at = i
			break
		}
	}
	return text[:at] + begin + body + end + "\n" + text[at:]
}

// firstDiff shows the first line where want and got part.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  file: %q\n  code: %q", i+1, wl, gl)
		}
	}
	return ""
}

// Binaries are the three binaries, in the order commands.md lists them.
var Binaries = []string{"aep-kimi", "aep-setup", "kimi-hook"}

// CommandsHead opens commands.md.
const CommandsHead = Banner + `# Commands

Every command of the three binaries: its usage, what it does, and its flags with their defaults
as an empty environment gives them (the variables a flag names as its default move it: see
[environment.md](environment.md); ` + "`~`" + ` is your home directory).

`

// CheckAlso checks a binary other than aep-kimi against the environment
// table: the variables it reads (named) are exactly those whose Also
// lists it.
func CheckAlso(t testing.TB, binary string, named map[string]bool) {
	t.Helper()
	listed := map[string]bool{}
	for _, e := range envtable.Table() {
		if slices.Contains(e.Also, binary) {
			listed[e.Name] = true
			if !named[e.Name] {
				t.Errorf("envtable.Table says %s reads %s; its code does not name it", binary, e.Name)
			}
		}
	}
	for v := range named {
		if !listed[v] {
			t.Errorf("%s reads %s; envtable.Table does not say so (Also)", binary, v)
		}
	}
}
