package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/cli"
)

// update rewrites the golden files under testdata (usage, tail).
var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// usageEnv is an empty environment with a fixed home, so the defaults the
// usage shows do not depend on who runs the test.
func usageEnv(t *testing.T) func(string) string { return homeEnv(t, "/home/op") }

// homeEnv is an empty environment but for HOME, set in the process too
// (some defaults come from os.UserHomeDir).
func homeEnv(t *testing.T, home string) func(string) string {
	t.Setenv("HOME", home)
	return func(k string) string {
		if k == "HOME" {
			return home
		}
		return ""
	}
}

// helpCases is every usage text: the top level, each command and each
// mode, by the arguments that print it.
func helpCases(getenv func(string) string) map[string][]string {
	cases := map[string][]string{"aep-kimi": {"-h"}}
	for _, c := range commands(getenv, stdio{}) {
		cases[c.Name] = []string{c.Name, "-h"}
		for _, m := range c.Modes {
			cases[c.Name+"-"+m.Name] = []string{c.Name, m.Name, "-h"}
		}
	}
	return cases
}

// TestUsageGolden pins each usage text, generated from the command table,
// in testdata/usage/NAME.txt (go test -run TestUsageGolden -update
// rewrites them): -h prints it on stdout, nothing on stderr, and exits 0.
func TestUsageGolden(t *testing.T) {
	getenv := usageEnv(t)
	for name, args := range helpCases(getenv) {
		t.Run(name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runContext(context.Background(), args, stdio{in: strings.NewReader(""), out: &out, err: &errb}, getenv)
			if code != 0 || errb.Len() != 0 {
				t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
			}
			path := filepath.Join("testdata", "usage", name+".txt")
			if *update {
				if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -run TestUsageGolden -update writes it)", err)
			}
			if out.String() != string(want) {
				t.Errorf("%v usage changed (-update to accept):\n got:\n%s\nwant:\n%s", args, out.String(), want)
			}
		})
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "usage", "*.txt"))
	cases := helpCases(getenv)
	for _, f := range files {
		if _, ok := cases[strings.TrimSuffix(filepath.Base(f), ".txt")]; !ok {
			t.Errorf("%s belongs to no command", f)
		}
	}
}

// TestUsageFormsNameRealFlags keeps each usage line honest: every --flag a
// form names is one the command defines, and every command has a summary
// and at least one form (a command with modes: each mode).
func TestUsageFormsNameRealFlags(t *testing.T) {
	getenv := usageEnv(t)
	flagRe := regexp.MustCompile(`(?:^|[\s\[(|])--?([a-z][a-z-]*)`)
	var check func(path string, c cli.Command)
	check = func(path string, c cli.Command) {
		if len(c.Modes) > 0 {
			for _, m := range c.Modes {
				check(path+" "+m.Name, m)
			}
			return
		}
		if len(c.Forms) == 0 {
			t.Errorf("%s: no usage form", path)
		}
		fs := c.FlagSet(path)
		c.Flags(fs)
		for _, f := range c.Forms {
			for _, m := range flagRe.FindAllStringSubmatch(f, -1) {
				if fs.Lookup(m[1]) == nil {
					t.Errorf("%s: usage form %q names --%s, which the command does not define", path, f, m[1])
				}
			}
		}
	}
	for _, c := range commands(getenv, stdio{}) {
		if c.Summary == "" {
			t.Errorf("%s: no summary", c.Name)
		}
		check(c.Name, c)
	}
}

// TestUsageErrorsAreOneLine: a bad flag, a wrong argument count, an
// unknown mode or command each exit 2 with one line on stderr naming the
// command, and print nothing on stdout.
func TestUsageErrorsAreOneLine(t *testing.T) {
	getenv := usageEnv(t)
	for _, args := range [][]string{
		{"nonsense"},
		{"up", "--bogus"},
		{"up", "extra"},
		{"respond", "--option", "deny"},
		{"respond", "--option", "deny", "s", "r", "extra"},
		{"instruct", "s"},
		{"cancel"},
		{"validate"},
		{"export"},
		{"export", "xml"},
		{"export", "otlp", "--signal"},
		{"map", "file.json"},
	} {
		var out, errb bytes.Buffer
		code := runContext(context.Background(), args, stdio{in: strings.NewReader(""), out: &out, err: &errb}, getenv)
		msg := errb.String()
		if code != 2 || out.Len() != 0 || strings.Count(msg, "\n") != 1 || !strings.HasPrefix(msg, "aep-kimi") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and one line", args, code, out.String(), msg)
		}
	}
}
