package adapter

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// ensureToken returns the hook token, creating it (0600, in a 0700 dir) on
// first start. kimi-hook reads the same file. A link in its place is
// refused, never read, followed or chmod-ed.
func ensureToken(home string) (string, error) {
	path := tokenPath(home)
	if err := safefile.PrivateDir(filepath.Dir(path)); err != nil {
		return "", fmt.Errorf("hook token: %w", err)
	}
	f, err := safefile.OpenFile(path, os.O_RDONLY, 0)
	switch {
	case err == nil:
		b, rerr := io.ReadAll(f)
		if rerr == nil {
			rerr = f.Chmod(0o600)
		}
		f.Close()
		if rerr != nil {
			return "", fmt.Errorf("hook token: %w", rerr)
		}
		// Empty or torn (a crash of an older release): an error naming
		// the fix, never quietly replaced.
		tok, cerr := tokenfile.Check(path, b, true)
		if cerr != nil {
			return "", fmt.Errorf("hook token: %w", cerr)
		}
		return tok, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("hook token: %w", err)
	}
	if err := tokenfile.Create(path); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("hook token: %w", err)
	}
	// Made here, or by another adapter starting at the same moment.
	return tokenfile.ReadHome(path)
}

// LogFileName returns the JSONL file name for a session (journal.FileName):
// reversible, safe for any session string, still readable.
func LogFileName(session string) string { return journal.FileName(session) }

// Paths under an AEP home.
func kimiDir(home string) string   { return filepath.Join(home, "kimi") }
func logDir(home string) string    { return filepath.Join(home, "logs", mapping.Agent) }
func tokenPath(home string) string { return filepath.Join(kimiDir(home), "hook.token") }

// TokenPath is where the hook token lives for an AEP home.
func TokenPath(home string) string { return tokenPath(home) }
