package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// walkName is a function the architecture page's answer walk names with the
// file it is in: `Type.Method` (`path/file.go`) or `function` (`file.js`).
var walkName = regexp.MustCompile("`([A-Za-z_][\\w]*(?:\\.[A-Za-z_][\\w]*)?)` \\(`([\\w./-]+\\.(?:go|js))`\\)")

// TestArchitectureWalkNamesRealFunctions keeps the walk of one answer in
// docs/architecture.md true to the code: every function it names beside a
// file is declared in that file, so a rename or a move on the answer's
// path fails here until the walk follows it.
func TestArchitectureWalkNamesRealFunctions(t *testing.T) {
	page, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	_, walk, ok := strings.Cut(string(page), "## One answer")
	if !ok {
		t.Fatal("architecture.md has no answer walk (## One answer)")
	}
	found := walkName.FindAllStringSubmatch(walk, -1)
	if len(found) < 10 {
		t.Fatalf("the walk names %d functions with their files; it walks the whole way", len(found))
	}
	for _, m := range found {
		name, file := m[1], m[2]
		src, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(file)))
		if err != nil {
			t.Errorf("%s: the walk names %s, which does not exist", name, file)
			continue
		}
		if !declares(string(src), file, name) {
			t.Errorf("the walk names %s in %s, which does not declare it", name, file)
		}
	}
}

// declares reports whether src declares name: a function, or a method
// Type.Method of a (possibly generic) type, in Go; a function in JS.
func declares(src, file, name string) bool {
	recv, fn, isMethod := strings.Cut(name, ".")
	if !isMethod {
		fn, recv = name, ""
	}
	var pat string
	switch {
	case strings.HasSuffix(file, ".js"):
		pat = `(?m)^(?:async )?function ` + regexp.QuoteMeta(name) + `\(`
	case recv != "":
		pat = `(?m)^func \(\w* ?\*?` + regexp.QuoteMeta(recv) + `(?:\[[^\]]*\])?\) ` + regexp.QuoteMeta(fn) + `\(`
	default:
		pat = `(?m)^func ` + regexp.QuoteMeta(fn) + `[\[(]`
	}
	return regexp.MustCompile(pat).MatchString(src)
}
