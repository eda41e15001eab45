package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/envtable"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/reftest"
	"github.com/aep-kimi/aep-kimi/station"
)

// envUse is how aep-kimi's commands use one variable: the commands that
// read it and the flags whose default it is.
type envUse struct {
	commands []string
	flags    []reftest.Flag
	flagCmds [][]string // per flag: the commands having it
}

// environmentReference is environment.md: station.Environment with what
// aep-kimi's command table says of each variable. Every variable a
// command names (its Env, or a flag's "env NAME") must be in the table.
func environmentReference(t *testing.T, getenv func(string) string) string {
	table := station.Environment()
	uses := map[string]*envUse{}
	for _, e := range table {
		uses[e.Name] = &envUse{}
	}
	envRe := regexp.MustCompile(`\benv ((?:AEP|KIMI)_[A-Z0-9_]+)`)
	var walk func(c reftest.Command)
	walk = func(c reftest.Command) {
		name := strings.TrimPrefix(c.Path, prog+" ")
		top, _, _ := strings.Cut(name, " ") // a mode reads as its command
		named := map[string]bool{}
		for _, v := range c.Env {
			named[strings.Fields(v)[0]] = true // "NAME (default)"
		}
		for _, f := range c.Flags {
			for _, m := range envRe.FindAllStringSubmatch(f.Usage, -1) {
				named[m[1]] = true
			}
		}
		for v := range named {
			if uses[v] == nil {
				t.Errorf("aep-kimi %s reads %s, which envtable.Table does not list", name, v)
			}
		}
		for _, e := range table {
			u := uses[e.Name]
			// A flag whose default the variable is says so: "env NAME", or
			// "(default ...$NAME...".
			word := regexp.MustCompile(`\benv ` + e.Name + `\b|\(default[^)]*\$` + e.Name + `\b`)
			read := named[e.Name]
			for _, f := range c.Flags {
				if !word.MatchString(f.Usage) {
					continue
				}
				read = true
				i := slices.IndexFunc(u.flags, func(g reftest.Flag) bool { return g.Name == f.Name && g.Default == f.Default })
				if i < 0 {
					u.flags = append(u.flags, f)
					u.flagCmds = append(u.flagCmds, nil)
					i = len(u.flags) - 1
				}
				u.flagCmds[i] = appendNew(u.flagCmds[i], top)
			}
			if read {
				u.commands = appendNew(u.commands, top)
			}
		}
		for _, m := range c.Modes {
			walk(m)
		}
	}
	for _, c := range reftest.FromTable(prog, commands(getenv, stdio{})) {
		walk(c)
	}
	var b strings.Builder
	b.WriteString(reftest.Banner + "# Environment\n\n" +
		"Every environment variable the three binaries read. A variable that is a flag's default gives way to\n" +
		"the flag; the flag's own default applies when both are unset. `~` is your home directory.\n\n" +
		"| variable | default | what it sets | read by |\n|---|---|---|---|\n")
	for _, e := range table {
		u := uses[e.Name]
		readers := append(slices.Clone(u.commands), e.Also...)
		if len(readers) == 0 {
			t.Errorf("%s: no command of aep-kimi names it (in its Env or a flag's usage) and no other binary is listed", e.Name)
		}
		def, sets := e.Default, e.Sets
		var flagNotes, defs []string
		defCmds := map[string][]string{}
		for i, f := range u.flags {
			if f.Default != "" {
				defs = appendNew(defs, f.Default)
				for _, c := range u.flagCmds[i] {
					defCmds[f.Default] = appendNew(defCmds[f.Default], c)
				}
			}
			flagNotes = appendNew(flagNotes, reftest.Code("--"+f.Name))
			if sets == "" {
				sets = f.Usage
			}
		}
		for _, d := range defs {
			where := ""
			if len(defs) > 1 {
				where = " (" + strings.Join(defCmds[d], ", ") + ")"
			}
			def = joinNew(def, reftest.Code(d)+where)
		}
		if e.Default != "" {
			def = reftest.Code(e.Default)
		}
		if sets == "" {
			t.Errorf("%s: envtable.Table gives no description and no flag names it", e.Name)
		}
		setsCell := reftest.Cell(sets)
		if len(flagNotes) > 0 {
			setsCell = "the default of " + strings.Join(flagNotes, ", ") + ": " + setsCell
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", reftest.Code(e.Name), def, setsCell, strings.Join(readers, ", "))
	}
	return b.String()
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

func joinNew(have, s string) string {
	if have == "" {
		return s
	}
	if strings.Contains(have, s) {
		return have
	}
	return have + ", " + s
}

// TestEnvironmentTableIsTheCode: every AEP_ or KIMI_ name the binaries'
// code spells is in envtable.Table, and every name there is spelled
// somewhere in it, so the table can neither miss a variable nor keep a
// dead one.
func TestEnvironmentTableIsTheCode(t *testing.T) {
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	lit := regexp.MustCompile(`"((?:AEP|KIMI)_[A-Z0-9_]+)"`)
	inCode := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			// Not the binaries: load tools, test support, release tooling.
			switch rel {
			case "bench", "tools", "internal/testkit", "release", "conformance", "docs":
				return filepath.SkipDir
			case "internal/envtable": // the table itself spells every name
				return filepath.SkipDir
			}
			if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || rel == "station/environment.go" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllStringSubmatch(string(src), -1) {
			inCode[m[1]] = appendNew(inCode[m[1]], rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, e := range envtable.Table() {
		listed[e.Name] = true
		if lit.MatchString(`"`+e.Name+`"`) && inCode[e.Name] == nil {
			t.Errorf("envtable.Table lists %s, which no code reads", e.Name)
		}
	}
	var missing []string
	for name, files := range inCode {
		if !listed[name] {
			missing = append(missing, name+" ("+strings.Join(files, ", ")+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("the code reads %s, which envtable.Table does not list", m)
	}
}
