package setup

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/merge")

const corpusDir = "testdata/merge"

// goldenConfig is the Config every corpus case starts from; a case's
// NAME.opts file (key=value lines) adjusts it.
func goldenConfig(t *testing.T, name string) Config {
	t.Helper()
	cfg := Config{
		HookCmd:     "/opt/aep/bin/kimi-hook",
		AEPHome:     "/home/user/.aep",
		DaemonURL:   DefaultDaemonURL,
		KimiVersion: "2.1.0",
		Now:         func() time.Time { return time.Date(2026, 7, 21, 9, 8, 7, 0, time.UTC) },
	}
	raw, err := os.ReadFile(filepath.Join(corpusDir, name+".opts"))
	if errors.Is(err, fs.ErrNotExist) {
		return cfg
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s.opts: bad line %q", name, line)
		}
		switch k {
		case "version":
			cfg.KimiVersion = v
		case "control":
			cfg.Control = v == "true"
		case "hold":
			if cfg.HoldMs, err = strconv.Atoi(v); err != nil {
				t.Fatal(err)
			}
		case "hookcmd":
			cfg.HookCmd = v
		case "aephome":
			cfg.AEPHome = v
		default:
			t.Fatalf("%s.opts: unknown key %q", name, k)
		}
	}
	return cfg
}

type corpusCase struct {
	name  string
	input []byte
}

func loadCorpus(t *testing.T) []corpusCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(corpusDir, "*.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 12 {
		t.Fatalf("corpus has %d cases, want at least 12", len(paths))
	}
	var cases []corpusCase
	for _, p := range paths {
		in, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, corpusCase{name: strings.TrimSuffix(filepath.Base(p), ".toml"), input: in})
	}
	return cases
}

// mergeAndValidate is Write without the file: what bytes would be written,
// or why not.
func mergeAndValidate(cfg Config, in []byte) ([]byte, error) {
	block, err := Render(cfg)
	if err != nil {
		return nil, err
	}
	out, err := Merge(in, block)
	if err != nil {
		return nil, err
	}
	if err := Validate(out, cfg.acceptedEvents()); err != nil {
		return nil, err
	}
	return out, nil
}

// checkGolden compares got with the golden file, or rewrites it with -update
// (removing the file of the other outcome; see updateGolden).
func checkGolden(t *testing.T, path string, got []byte, stale ...string) {
	t.Helper()
	if *update {
		if err := updateGolden(path, got, stale...); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing golden file (run go test -update): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs\n got: %q\nwant: %q", path, truncate(got), truncate(want))
	}
	for _, s := range stale {
		if _, err := os.Stat(s); err == nil {
			t.Errorf("%s exists but the outcome is %s (run go test -update; it refuses to drop a recorded .err)", s, filepath.Ext(path))
		}
	}
}

// updateGolden writes got to path and removes the files of the other
// outcome, but never turns a recorded refusal (NAME.err) into an accepted
// result: accepting what was refused is a change of behaviour that needs a
// failing test first, so it fails and changes nothing; the .err file is then
// deleted by hand.
func updateGolden(path string, got []byte, stale ...string) error {
	if filepath.Ext(path) != ".err" {
		for _, s := range stale {
			if filepath.Ext(s) != ".err" {
				continue
			}
			if _, err := os.Stat(s); err == nil {
				return fmt.Errorf("-update refused: %s records a refusal and the input is now accepted; "+
					"write a test that fails on the old behaviour, then delete %s by hand", s, filepath.Base(s))
			}
		}
	}
	if err := os.WriteFile(path, got, 0o644); err != nil {
		return err
	}
	for _, s := range stale {
		if err := os.Remove(s); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func truncate(b []byte) string {
	const n = 600
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

// TestMergeGolden drives every corpus input through Merge+Validate and
// compares the exact bytes (NAME.golden) or the refusal (NAME.err); it then
// checks the properties: a second write is a no-op, stripping gives the
// input back (minus our old hooks: NAME.removed), exactly one block.
func TestMergeGolden(t *testing.T) {
	t.Parallel()
	for _, c := range loadCorpus(t) {
		t.Run(c.name, func(t *testing.T) {
			cfg := goldenConfig(t, c.name)
			base := filepath.Join(corpusDir, c.name)
			out, err := mergeAndValidate(cfg, c.input)
			if err != nil {
				checkGolden(t, base+".err", []byte(err.Error()+"\n"), base+".golden", base+".removed")
				return
			}
			checkGolden(t, base+".golden", out, base+".err")

			again, err := mergeAndValidate(cfg, out)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("write->write is not a no-op (err %v)", err)
			}
			l, err := analyze(out)
			if err != nil {
				t.Fatalf("result does not analyze: %v", err)
			}
			if len(l.blocks) != 1 {
				t.Errorf("result has %d blocks, want 1", len(l.blocks))
			}
			stripped, found, err := Strip(out)
			if err != nil || !found {
				t.Fatalf("Strip(result) = found %v, err %v", found, err)
			}
			inLayout, err := analyze(c.input)
			if err != nil {
				t.Fatal(err)
			}
			if cleansed := inLayout.cleansed(true); bytes.Equal(cleansed, c.input) {
				if !bytes.Equal(stripped, c.input) {
					t.Errorf("strip(write(x)) != x\n got: %q\nwant: %q", truncate(stripped), truncate(c.input))
				}
			} else {
				checkGolden(t, base+".removed", stripped)
			}
		})
	}
}

// TestWriteRemoveCorpus runs the same corpus through the file operations:
// mode and bytes kept, backups made only on change, refusals change nothing,
// write->remove gives the input back.
func TestWriteRemoveCorpus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range loadCorpus(t) {
		t.Run(c.name, func(t *testing.T) {
			cfg := goldenConfig(t, c.name)
			cfg.Home = t.TempDir()
			path := cfg.ConfigPath()
			const mode = 0o640
			if err := os.WriteFile(path, c.input, mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, mode); err != nil {
				t.Fatal(err)
			}
			want, wantErr := mergeAndValidate(cfg, c.input)

			res, err := Write(ctx, cfg)
			got := readFile(t, path)
			if wantErr != nil {
				if err == nil || !strings.Contains(err.Error(), wantErr.Error()) {
					t.Fatalf("Write error = %v, want %v", err, wantErr)
				}
				if !bytes.Equal(got, c.input) {
					t.Fatal("a refused write changed the file")
				}
				assertFiles(t, cfg.Home, ConfigFileName)
				return
			}
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("file differs from Merge result")
			}
			assertMode(t, path, mode)
			if res.Changed != !bytes.Equal(c.input, want) {
				t.Errorf("Changed = %v", res.Changed)
			}
			if res.Changed {
				backup := path + BackupInfix + "20260721T090807Z"
				if res.Backup != backup {
					t.Errorf("Backup = %q, want %q", res.Backup, backup)
				}
				if !bytes.Equal(readFile(t, backup), c.input) {
					t.Error("backup differs from the original")
				}
				assertMode(t, backup, mode)
				assertFiles(t, cfg.Home, ConfigFileName, filepath.Base(backup))
			} else {
				assertFiles(t, cfg.Home, ConfigFileName)
			}

			// A re-run changes nothing and makes no backup.
			before := dirNames(t, cfg.Home)
			res2, err := Write(ctx, cfg)
			if err != nil || res2.Changed || res2.Backup != "" {
				t.Fatalf("second Write: changed %v backup %q err %v", res2.Changed, res2.Backup, err)
			}
			if after := dirNames(t, cfg.Home); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("second Write created files: %v -> %v", before, after)
			}

			rm, err := Remove(ctx, cfg)
			if err != nil || !rm.Changed {
				t.Fatalf("Remove: changed %v err %v", rm.Changed, err)
			}
			removed := readFile(t, path)
			wantRemoved := c.input
			if b, err := os.ReadFile(filepath.Join(corpusDir, c.name+".removed")); err == nil {
				wantRemoved = b
			}
			if !bytes.Equal(removed, wantRemoved) {
				t.Errorf("write->remove differs\n got: %q\nwant: %q", truncate(removed), truncate(wantRemoved))
			}
			assertMode(t, path, mode)
			// Nothing left to remove: no change, no backup.
			before = dirNames(t, cfg.Home)
			rm2, err := Remove(ctx, cfg)
			if err != nil || rm2.Changed {
				t.Fatalf("second Remove: changed %v err %v", rm2.Changed, err)
			}
			if after := dirNames(t, cfg.Home); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("no-op Remove created files: %v -> %v", before, after)
			}
		})
	}
}

// -update keeps a recorded refusal: a case whose NAME.err exists and which
// is now accepted fails, and neither file changes; the other direction, and
// an accepted result that changes, are rewritten.
func TestGoldenUpdateKeepsRefusals(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base := filepath.Join(dir, "case")
	if err := os.WriteFile(base+".err", []byte("refused\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := updateGolden(base+".golden", []byte("accepted\n"), base+".err", base+".removed")
	if err == nil || !strings.Contains(err.Error(), "case.err") {
		t.Fatalf("refusal -> accepted: err %v, want a refusal naming case.err", err)
	}
	assertFiles(t, dir, "case.err")
	if b := readFile(t, base+".err"); string(b) != "refused\n" {
		t.Fatalf("case.err rewritten to %q", b)
	}

	if err := updateGolden(base+".err", []byte("refused again\n"), base+".golden", base+".removed"); err != nil {
		t.Fatalf("refusal message changes: %v", err)
	}
	if err := os.Remove(base + ".err"); err != nil {
		t.Fatal(err)
	}
	if err := updateGolden(base+".golden", []byte("accepted\n"), base+".err"); err != nil {
		t.Fatalf("new accepted case: %v", err)
	}
	if err := updateGolden(base+".err", []byte("now refused\n"), base+".golden", base+".removed"); err != nil {
		t.Fatalf("accepted -> refusal: %v", err)
	}
	assertFiles(t, dir, "case.err")
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func assertMode(t *testing.T, p string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s mode = %o, want %o", filepath.Base(p), got, want)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func assertFiles(t *testing.T, dir string, want ...string) {
	t.Helper()
	got := dirNames(t, dir)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("files in %s = %v, want %v", dir, got, want)
	}
}
