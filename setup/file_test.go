package setup

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testConfig(home string) Config {
	return Config{
		Home:        home,
		HookCmd:     "/opt/aep/bin/kimi-hook",
		AEPHome:     "/home/user/.aep",
		KimiVersion: "2.1.0",
		Now:         func() time.Time { return time.Date(2026, 7, 21, 9, 8, 7, 0, time.UTC) },
	}
}

func TestWriteCreatesFileAndDirectory(t *testing.T) {
	t.Parallel()
	home := filepath.Join(t.TempDir(), "a", "kimi home")
	cfg := testConfig(home)
	res, err := Write(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Created || !res.Changed || res.Backup != "" || res.Before != StateAbsent {
		t.Fatalf("result %+v", res)
	}
	assertMode(t, cfg.ConfigPath(), NewFileMode)
	fi, err := os.Stat(home)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != NewDirMode {
		t.Errorf("dir mode %o", fi.Mode().Perm())
	}
	block, _ := Render(cfg)
	if got := readFile(t, cfg.ConfigPath()); !bytes.Equal(got, block) {
		t.Errorf("new file is not just the block")
	}
	assertFiles(t, home, ConfigFileName)
}

func TestWriteDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	missing := testConfig(filepath.Join(t.TempDir(), "nope"))
	missing.DryRun = true
	res, err := Write(ctx, missing)
	if err != nil || !res.Changed || !res.Created {
		t.Fatalf("dry run on missing file: %+v %v", res, err)
	}
	if _, err := os.Stat(missing.Home); !errors.Is(err, os.ErrNotExist) {
		t.Error("dry run created the directory")
	}

	cfg := testConfig(t.TempDir())
	orig := []byte("a = 1\n")
	if err := os.WriteFile(cfg.ConfigPath(), orig, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.DryRun = true
	res, err = Write(ctx, cfg)
	if err != nil || !res.Changed || res.Backup != "" {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	if !bytes.Equal(readFile(t, cfg.ConfigPath()), orig) {
		t.Error("dry run changed the file")
	}
	assertFiles(t, cfg.Home, ConfigFileName)
}

func TestWriteThroughSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	real := filepath.Join(dir, "dotfiles", "kimi.toml")
	if err := os.MkdirAll(filepath.Dir(real), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(real, []byte("a = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(home, ConfigFileName)
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	res, err := Write(context.Background(), testConfig(home))
	if err != nil {
		t.Fatal(err)
	}
	if res.Path != real {
		t.Errorf("wrote %s, want the link target %s", res.Path, real)
	}
	fi, err := os.Lstat(link)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("config.toml is no longer a symlink")
	}
	if !bytes.Contains(readFile(t, link), []byte(fenceEndText)) {
		t.Error("block not written through the link")
	}
	assertMode(t, real, 0o644)
}

func TestBackupNamesNeverCollide(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testConfig(t.TempDir())
	if err := os.WriteFile(cfg.ConfigPath(), []byte("a = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	first, err := Write(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Control = true // a different block, same second
	second, err := Write(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if first.Backup == second.Backup || second.Backup != first.Backup+"-1" {
		t.Errorf("backups %q then %q", first.Backup, second.Backup)
	}
	if !bytes.Equal(readFile(t, first.Backup), []byte("a = 1\n")) {
		t.Error("first backup overwritten")
	}
}

func TestCheckUnchangedDetectsConcurrentEdit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, ConfigFileName)
	if err := os.WriteFile(p, []byte("a = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cf, err := readConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkUnchanged(cf); err != nil {
		t.Fatalf("unchanged file: %v", err)
	}
	if err := os.WriteFile(p, []byte("a = 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := checkUnchanged(cf); err == nil || !strings.Contains(err.Error(), "changed while") {
		t.Errorf("edit not detected: %v", err)
	}
	if err := writeAtomic(cf, []byte("b = 1\n"), slog.New(slog.DiscardHandler)); err == nil {
		t.Error("writeAtomic replaced a file that changed underneath")
	}
	if got := readFile(t, p); string(got) != "a = 2\n" {
		t.Errorf("file = %q", got)
	}
	assertFiles(t, dir, ConfigFileName) // no temp file left behind
}

func TestWriteRefusesNonRegular(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	if err := os.Mkdir(filepath.Join(home, ConfigFileName), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(context.Background(), testConfig(home)); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("err = %v", err)
	}
}

func TestWriteRefusalKeepsFile(t *testing.T) {
	t.Parallel()
	// A version-specific refusal: the user's TurnStarted hook on a Kimi 0.31.
	cfg := testConfig(t.TempDir())
	cfg.KimiVersion = "0.31.0"
	orig := []byte("[[hooks]]\nevent = \"TurnStarted\"\ncommand = \"x\"\n")
	if err := os.WriteFile(cfg.ConfigPath(), orig, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Write(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), `event "TurnStarted" is not one of the 16`) {
		t.Fatalf("err = %v", err)
	}
	if !bytes.Equal(readFile(t, cfg.ConfigPath()), orig) {
		t.Error("refusal changed the file")
	}
	assertFiles(t, cfg.Home, ConfigFileName)
	// Unknown version: the user's hook is not ours to judge; 16 registered.
	cfg.KimiVersion = ""
	res, err := Write(context.Background(), cfg)
	if err != nil || len(res.Events) != BaseEventCount {
		t.Fatalf("unknown version: %d events, %v", len(res.Events), err)
	}
}

func TestRemoveMissingFileAndHome(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	res, err := Remove(ctx, Config{Home: filepath.Join(t.TempDir(), "none")})
	if err != nil || res.Changed {
		t.Fatalf("missing file: %+v %v", res, err)
	}
	if _, err := Remove(ctx, Config{}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("empty home: %v", err)
	}
	if _, err := Write(ctx, Config{}); !errors.Is(err, ErrBadConfig) {
		t.Errorf("Write empty home: %v", err)
	}
	ctxDone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Write(ctxDone, testConfig(t.TempDir())); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled ctx: %v", err)
	}
}
