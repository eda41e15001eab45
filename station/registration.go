package station

import (
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/setup"
)

// registration is the PreToolUse timeout Kimi's config.toml registers,
// read again whenever the file changes (a stat per hold), so `aep-setup
// write kimi-code --control` under a running adapter sets the next held
// call's deadline without a restart.
type registration struct {
	home string
	log  *slog.Logger

	mu      sync.Mutex
	seen    os.FileInfo // the file last read; nil: never read, or missing
	read    bool
	timeout time.Duration
}

// Timeout is the registered PreToolUse timeout now (0: none registered).
// A file that cannot be read keeps the last timeout read, and is tried
// again on the next call.
func (r *registration) Timeout() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	fi, _ := os.Stat(setup.Config{Home: r.home}.ConfigPath())
	if r.read && sameFile(r.seen, fi) {
		return r.timeout
	}
	secs, ok, err := setup.PreToolUseTimeout(r.home)
	if err != nil {
		r.log.Warn("cannot read the hooks Kimi has registered; the gate keeps to the timeout read before and the wait each hook declares", "err", err)
		return r.timeout
	}
	t := time.Duration(0)
	if ok {
		t = time.Duration(secs) * time.Second
	}
	if r.read && t != r.timeout {
		r.log.Info("Kimi's PreToolUse registration changed: the next held call follows it", "kimi_timeout_s", secs,
			"gate_window", max(adapter.GateWindow(t), 0))
	}
	r.seen, r.read, r.timeout = fi, true, t
	return t
}

// sameFile reports whether b is the file a was, unchanged: the same file,
// size and modification time (aep-setup replaces it, so a rewrite is a new
// file).
func sameFile(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
