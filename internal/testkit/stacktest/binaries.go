package stacktest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
)

// programs are the binaries an end-to-end test runs.
var programs = []string{"./cmd/aep-kimi", "./cmd/kimi-hook", "./cmd/aep-setup"}

// Binaries returns the directory holding aep-kimi, kimi-hook and
// aep-setup built from this source tree. The directory is named by a hash
// of the sources and built under a file lock, so the end-to-end packages
// that `go test ./...` runs side by side link the three programs once
// between them rather than once each. Every test that runs them is
// end-to-end and skips under -short.
func Binaries(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the binaries; skipped under -short")
	}
	dir, err := buildOnce(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func buildOnce(ctx context.Context) (string, error) {
	root, err := fixtures.ModuleRoot()
	if err != nil {
		return "", err
	}
	key, err := sourceHash(root)
	if err != nil {
		return "", fmt.Errorf("hashing the sources: %w", err)
	}
	dir := filepath.Join(os.TempDir(), "aep-kimi-e2e-bin-"+key)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	lock, err := safefile.OpenFile(filepath.Join(dir, ".build.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := safefile.Lock(lock); err != nil {
		return "", err
	}
	defer safefile.Unlock(lock) //nolint:errcheck // closing releases it too
	done := filepath.Join(dir, ".built")
	if _, err := os.Stat(done); err == nil {
		return dir, nil
	}
	if err := proctest.GoBuild(ctx, root, dir+string(filepath.Separator), programs...); err != nil {
		return "", err
	}
	// The marker comes last: a build cut short is redone by the next run.
	return dir, os.WriteFile(done, nil, 0o600)
}

// sourceHash hashes every file the programs could be built from: the
// module's files but tests, test data, docs, the tools modules and dot
// directories (.git among them).
func sourceHash(root string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || rel == "tools" || rel == "docs") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, "_test.go") || !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fmt.Fprintf(h, "%s\x00", filepath.ToSlash(rel))
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		_, err = h.Write([]byte{0})
		return err
	})
	if err != nil && !errors.Is(err, fs.SkipAll) {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
