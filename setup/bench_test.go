package setup

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkMerge times a refresh of a current block in a typical config
// (the path every re-run takes).
func BenchmarkMerge(b *testing.B) {
	in, err := os.ReadFile(filepath.Join(corpusDir, "user-hooks.golden"))
	if err != nil {
		b.Fatal(err)
	}
	block, err := Render(Config{HookCmd: "/opt/aep/bin/kimi-hook", AEPHome: "/home/user/.aep", KimiVersion: "2.1.0"})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Merge(in, block); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate times the strict read-back of the same file.
func BenchmarkValidate(b *testing.B) {
	in, err := os.ReadFile(filepath.Join(corpusDir, "user-hooks.golden"))
	if err != nil {
		b.Fatal(err)
	}
	events := AllHookEvents()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Validate(in, events); err != nil {
			b.Fatal(err)
		}
	}
}
