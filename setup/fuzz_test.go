package setup

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// addCorpusSeeds seeds a fuzz target with every corpus input and golden.
func addCorpusSeeds(f *testing.F) {
	f.Helper()
	for _, pattern := range []string{"*.toml", "*.golden"} {
		paths, err := filepath.Glob(filepath.Join(corpusDir, pattern))
		if err != nil {
			f.Fatal(err)
		}
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// FuzzMerge: Merge never panics; when it succeeds the result parses, holds
// exactly one block, re-merging is a no-op, and stripping the block gives
// back the input without our old hooks (the input itself when it had none).
func FuzzMerge(f *testing.F) {
	addCorpusSeeds(f)
	block, err := Render(Config{HookCmd: "/opt/aep/bin/kimi-hook", AEPHome: "/home/user/.aep", KimiVersion: "2.1.0"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := Merge(in, block)
		if err != nil {
			return
		}
		if _, err := parseCheck(out); err != nil {
			t.Fatalf("result does not parse: %v", err)
		}
		l, err := analyze(out)
		if err != nil {
			t.Fatalf("result does not analyze: %v", err)
		}
		if len(l.blocks) != 1 {
			t.Fatalf("result has %d blocks", len(l.blocks))
		}
		stripped, found, err := Strip(out)
		if err != nil || !found {
			t.Fatalf("Strip(result): found %v err %v", found, err)
		}
		inLayout, err := analyze(in)
		if err != nil {
			t.Fatalf("Merge accepted an input analyze rejects: %v", err)
		}
		if want := inLayout.cleansed(true); !bytes.Equal(stripped, want) {
			t.Fatalf("strip(merge(x)) != x without our hooks\n got: %q\nwant: %q", stripped, want)
		}
		again, err := Merge(out, block)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("merge is not idempotent (err %v)", err)
		}
	})
}

// FuzzStrip: Strip never panics, and what it returns parses and holds no
// block.
func FuzzStrip(f *testing.F) {
	addCorpusSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		out, found, err := Strip(in)
		if err != nil || !found {
			return
		}
		l, err := analyze(out)
		if err != nil {
			t.Fatalf("stripped result does not analyze: %v", err)
		}
		if len(l.blocks) != 0 {
			t.Fatalf("stripped result still has %d blocks", len(l.blocks))
		}
	})
}

// FuzzValidate: Validate never panics and gives one-line errors.
func FuzzValidate(f *testing.F) {
	addCorpusSeeds(f)
	events := AllHookEvents()
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := Validate(in, events); err != nil && bytes.ContainsAny([]byte(err.Error()), "\n") {
			t.Fatalf("multi-line error: %q", err)
		}
	})
}

// FuzzShellWords: shellWords never panics, and reads back any quoted word.
func FuzzShellWords(f *testing.F) {
	for _, s := range []string{"", "a b", "it's", `"a\"b"`, "'x'\\''y'", "a\\\nb", "/opt/My Tools/kimi-hook"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = shellWords(s)
		got, err := shellWords(shellQuote(s) + " --daemon " + shellQuote(s))
		if err != nil || !slices.Equal(got, []string{s, "--daemon", s}) {
			t.Fatalf("shellWords(quote(%q)) = %q, %v", s, got, err)
		}
	})
}
