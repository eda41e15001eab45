package setup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
)

// BlockState is what a config.toml holds of our hooks.
type BlockState string

// Block states.
const (
	// StateAbsent: no aep-setup block and no kimi-hook tables.
	StateAbsent BlockState = "absent"
	// StateCurrent: exactly what Write would produce; a re-run is a no-op.
	StateCurrent BlockState = "current"
	// StateStale: a block that Write would refresh (command, events,
	// timeouts, or layout differ).
	StateStale BlockState = "stale"
	// StateUnfenced: kimi-hook tables without the fence lines, as left by a
	// re-serializing editor (Kimi's web settings save).
	StateUnfenced BlockState = "unfenced"
	// StateInvalid: the file cannot be read as TOML or its block is broken.
	StateInvalid BlockState = "invalid"
)

// WriteResult says what Write did, or with DryRun would do.
type WriteResult struct {
	// Path is the file written (symlinks resolved).
	Path string
	// Before is the state found.
	Before BlockState
	// Created is set when config.toml did not exist.
	Created bool
	// Changed is false when the file already held exactly this block.
	Changed bool
	// Backup is the copy made before the change ("" when none).
	Backup string
	// Events are the registered events, in block order.
	Events []string
	// Block is the rendered block in canonical form (LF).
	Block []byte
}

// Write registers our hooks in cfg.Home/config.toml: render, merge, check
// the result strictly (Validate), back the old file up, and replace it
// atomically with its mode kept. A missing file (and directory) is created.
// Nothing is written when the result equals the file. Any refusal leaves the
// file untouched.
func Write(ctx context.Context, cfg Config) (WriteResult, error) {
	if err := ctx.Err(); err != nil {
		return WriteResult{}, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return WriteResult{}, err
	}
	if err := cfg.validateHome(); err != nil {
		return WriteResult{}, err
	}
	block, err := Render(cfg)
	if err != nil {
		return WriteResult{}, err
	}
	res := WriteResult{Events: cfg.Events(), Block: block}
	cur, err := readConfig(cfg.ConfigPath())
	if err != nil {
		return res, err
	}
	res.Path = cur.path
	l, err := analyze(cur.data)
	if err != nil {
		return res, fmt.Errorf("%s: %w", cur.path, err)
	}
	merged, err := l.merge(block)
	if err != nil {
		return res, fmt.Errorf("%s: %w", cur.path, err)
	}
	res.Before = l.state(merged)
	if err := Validate(merged, cfg.acceptedEvents()); err != nil {
		return res, fmt.Errorf("%s: %w", cur.path, err)
	}
	if cur.exists && bytes.Equal(merged, cur.data) {
		return res, nil
	}
	res.Changed, res.Created = true, !cur.exists
	log := cfg.Logger
	if cfg.DryRun {
		return res, nil
	}
	if !cur.exists {
		if err := os.MkdirAll(filepath.Dir(cur.path), NewDirMode); err != nil {
			return res, fmt.Errorf("create %s: %w", filepath.Dir(cur.path), err)
		}
		if err := writeAtomic(cur, merged, log); err != nil {
			return res, err
		}
		log.Debug("created config", "path", cur.path)
		return res, nil
	}
	if res.Backup, err = backup(cur, cfg); err != nil {
		return res, err
	}
	if err := writeAtomic(cur, merged, log); err != nil {
		discardBackup(res.Backup, log)
		res.Backup = ""
		return res, err
	}
	log.Debug("wrote config", "path", cur.path, "backup", res.Backup)
	return res, nil
}

// RemoveResult says what Remove did, or with DryRun would do.
type RemoveResult struct {
	Path     string
	Changed  bool
	Backup   string
	Blocks   int // fenced blocks removed
	Unfenced int // unfenced kimi-hook tables removed
}

// Remove strips our blocks (with the line breaks they claim, so the rest is
// byte-identical to the file before Write) and any unfenced kimi-hook tables,
// after a backup. No block, no change: nothing is written or backed up.
func Remove(ctx context.Context, cfg Config) (RemoveResult, error) {
	if err := ctx.Err(); err != nil {
		return RemoveResult{}, err
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return RemoveResult{}, err
	}
	if err := cfg.validateHome(); err != nil {
		return RemoveResult{}, err
	}
	cur, err := readConfig(cfg.ConfigPath())
	if err != nil {
		return RemoveResult{}, err
	}
	res := RemoveResult{Path: cur.path}
	if !cur.exists {
		return res, nil
	}
	l, err := analyze(cur.data)
	if err != nil {
		return res, fmt.Errorf("%s: %w", cur.path, err)
	}
	res.Blocks = len(l.blocks)
	for _, e := range l.entries {
		if e.block < 0 && e.ours() {
			res.Unfenced++
		}
	}
	if res.Blocks == 0 && res.Unfenced == 0 {
		return res, nil
	}
	out := l.cleansed(true)
	if _, err := parseCheck(out); err != nil {
		return res, fmt.Errorf("%s: without our hooks the file would be invalid (%w); nothing changed", cur.path, err)
	}
	res.Changed = true
	if cfg.DryRun {
		return res, nil
	}
	if res.Backup, err = backup(cur, cfg); err != nil {
		return res, err
	}
	if err := writeAtomic(cur, out, cfg.Logger); err != nil {
		discardBackup(res.Backup, cfg.Logger)
		res.Backup = ""
		return res, err
	}
	return res, nil
}

// state classifies the document given what Write would make of it.
func (l *layout) state(merged []byte) BlockState {
	switch {
	case merged != nil && bytes.Equal(merged, l.src):
		return StateCurrent
	case len(l.blocks) > 0:
		return StateStale
	}
	for _, e := range l.entries {
		if e.ours() {
			return StateUnfenced
		}
	}
	return StateAbsent
}

// configFile is config.toml as read: its resolved path, bytes and mode.
type configFile struct {
	path   string
	data   []byte
	mode   fs.FileMode
	exists bool
	info   fs.FileInfo
}

// readConfig reads path, following a symlink so a dotfile manager's link is
// updated through rather than replaced by a regular file.
func readConfig(path string) (configFile, error) {
	cf := configFile{path: path, mode: NewFileMode}
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cf, nil
	}
	if err != nil {
		return cf, fmt.Errorf("stat %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			return cf, fmt.Errorf("%s is a symlink that does not resolve: %w", path, err)
		}
		cf.path = target
		if fi, err = os.Stat(target); err != nil {
			return cf, fmt.Errorf("stat %s: %w", target, err)
		}
	}
	if !fi.Mode().IsRegular() {
		return cf, fmt.Errorf("%s is not a regular file", cf.path)
	}
	data, err := os.ReadFile(cf.path)
	if err != nil {
		return cf, fmt.Errorf("read %s: %w", cf.path, err)
	}
	cf.data, cf.mode, cf.exists, cf.info = data, fi.Mode().Perm(), true, fi
	return cf, nil
}

// backup copies the current bytes to path.aep-backup-<UTC stamp> with the
// file's mode, never overwriting an earlier backup.
func backup(cf configFile, cfg Config) (string, error) {
	base := cf.path + BackupInfix + cfg.Now().UTC().Format(BackupTimeLayout)
	const maxTries = 100
	for i := 0; i < maxTries; i++ {
		name := base
		if i > 0 {
			name += "-" + strconv.Itoa(i)
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, cf.mode)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("back up %s: %w", cf.path, err)
		}
		err = writeSyncClose(f, cf.data, cf.mode)
		if err != nil {
			_ = os.Remove(name)
			return "", fmt.Errorf("back up %s: %w", cf.path, err)
		}
		return name, nil
	}
	return "", fmt.Errorf("back up %s: %d backups with the same timestamp already exist", cf.path, maxTries)
}

// discardBackup removes the backup of a change that did not happen, so a
// failed run leaves the directory as it found it.
func discardBackup(name string, log *slog.Logger) {
	if err := os.Remove(name); err != nil {
		log.Debug("remove unused backup", "path", name, "err", err)
	}
}

// writeAtomic replaces cf.path with data (atomicfile: temp file, fsync,
// rename, fsync of the directory). It keeps the file's mode (and owner where
// permitted) and refuses if the file changed since it was read.
func writeAtomic(cf configFile, data []byte, log *slog.Logger) error {
	err := atomicfile.Write(cf.path, data, atomicfile.Options{
		Perm: cf.mode,
		Prepare: func(tmp *os.File) error {
			if cf.info != nil {
				keepOwner(tmp, cf.info)
			}
			return checkUnchanged(cf)
		},
	})
	if errors.Is(err, atomicfile.ErrDirSync) {
		// The rename is done; some file systems cannot fsync a directory.
		log.Debug("fsync directory failed", "path", cf.path, "err", err)
		return nil
	}
	return err
}

// checkUnchanged guards against losing an edit made (by Kimi or the user)
// between our read and our rename.
func checkUnchanged(cf configFile) error {
	now, err := os.ReadFile(cf.path)
	if !cf.exists {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%s appeared while aep-setup was writing it; nothing changed, run again", cf.path)
	}
	if err != nil {
		return fmt.Errorf("re-read %s: %w", cf.path, err)
	}
	if !bytes.Equal(now, cf.data) {
		return fmt.Errorf("%s changed while aep-setup was writing it; nothing changed, run again", cf.path)
	}
	return nil
}

func writeSyncClose(f *os.File, data []byte, mode fs.FileMode) error {
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Chmod(mode) // explicit: the umask must not narrow or widen it
	}
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}
