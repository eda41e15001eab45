package kimiharness

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Capture is one hook invocation as a capture hook saw it.
type Capture struct {
	Event string `json:"event"`
	// Time is when the hook started, in Unix seconds.
	Time float64 `json:"time"`
	// Raw is the hook's stdin, exactly.
	Raw string `json:"raw"`
}

// CaptureHook returns a hook command that stores each payload it is given
// in dir, one file per invocation named by its start time in nanoseconds
// (GNU date). The payload is written under a partSuffix name and renamed
// once whole, so InFlight tells a hook still running from one done.
// It runs in a session of its own where setsid exists: Kimi kills the
// process group of a PostToolUse hook when the turn ends, often within tens
// of milliseconds, and the capture must survive that.
func CaptureHook(dir string) string {
	cmd := fmt.Sprintf(`sh -c 'f="$1/$(date +%%s%%N).$$"; cat > "$f%s" && mv "$f%s" "$f"' capture %s`, partSuffix, partSuffix, shellQuote(dir))
	if _, err := exec.LookPath("setsid"); err == nil {
		cmd = "setsid -w " + cmd
	}
	return cmd
}

// partSuffix marks a capture its hook is still writing.
const partSuffix = ".part"

// InFlight counts the captures in dir whose hooks are still writing them.
func InFlight(dir string) (int, error) {
	parts, err := filepath.Glob(filepath.Join(dir, "*"+partSuffix))
	return len(parts), err
}

// ReadCaptures reads what CaptureHook stored in dir, in start order.
func ReadCaptures(dir string) ([]Capture, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type named struct {
		ns, pid int64
		c       Capture
	}
	var all []named
	for _, e := range entries {
		ns, pid, ok := strings.Cut(e.Name(), ".")
		n, err1 := strconv.ParseInt(ns, 10, 64)
		p, err2 := strconv.ParseInt(pid, 10, 64)
		if !ok || err1 != nil || err2 != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		var head struct {
			Event string `json:"hook_event_name"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("capture %s: %w", e.Name(), err)
		}
		all = append(all, named{n, p, Capture{Event: head.Event, Time: float64(n) / 1e9, Raw: string(raw)}})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].ns != all[j].ns {
			return all[i].ns < all[j].ns
		}
		return all[i].pid < all[j].pid
	})
	out := make([]Capture, len(all))
	for i, a := range all {
		out[i] = a.c
	}
	return out, nil
}

// WriteCaptures writes captures as JSON lines to path.
func WriteCaptures(path string, caps []Capture) error {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for _, c := range caps {
		if err := enc.Encode(c); err != nil {
			return err
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
