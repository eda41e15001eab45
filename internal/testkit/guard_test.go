// Package testkit holds only tests' support, in its sub-packages; this test
// keeps it that way.
package testkit

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
)

const testkitPath = "github.com/aep-kimi/aep-kimi/internal/testkit"

// No binary or library links test support: only tests, the test kit itself
// and the load tools under bench/ may import it.
func TestOnlyTestsImportTestkit(t *testing.T) {
	root, err := fixtures.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "bench" || rel == "tools" || rel == "internal/testkit" || strings.HasPrefix(d.Name(), ".") && rel != "." || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == testkitPath || strings.HasPrefix(p, testkitPath+"/") {
				t.Errorf("%s imports %s: test support must not reach a binary or library", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files: the walk did not see the module", checked)
	}
}
