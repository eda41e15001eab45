package adapter

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/journal"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/testkit/safefiletest"
)

func metricsText(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// A crash left the session log ending in half an event. The next hook's
// event starts a line of its own: the log validates, the cut bytes are in
// a quarantine file next to it, and /metrics counts the repair.
func TestTornLogTailRepairedOnAppend(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	s := newTestServer(t, home, nil)
	start := []byte(`{"hook_event_name":"SessionStart","session_id":"torn","source":"startup"}`)
	prompt := []byte(`{"hook_event_name":"UserPromptSubmit","session_id":"torn","prompt":[{"type":"text","text":"hi"}],"is_steer":false}`)
	for _, p := range [][]byte{start, prompt} {
		if _, _, err := s.ingest(&delivery{payload: p, at: time.Now()}, false); err != nil {
			t.Fatal(err)
		}
	}
	s.core.CloseAll()
	path := filepath.Join(logDir(home), LogFileName("torn"))
	whole, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(whole, []byte("\n"))
	torn := lines[len(lines)-2][:40] // the start of a real event line
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(torn)
	f.Close()

	s2 := newTestServer(t, home, nil)
	base := runServer(t, s2)
	if code, _ := post(t, base+"/hook", s2.token, "application/json",
		[]byte(`{"hook_event_name":"Stop","session_id":"torn","stop_hook_active":false}`)); code != http.StatusOK {
		t.Fatalf("hook status %d", code)
	}
	ev := readLog(t, home, "torn") // fails on a glued line
	assertValidStream(t, ev)
	if got := strings.Join(types(ev), ","); got != "session.started,run.started,run.finished" {
		t.Fatalf("stream %s", got)
	}
	qs, _ := filepath.Glob(path + journal.TornSuffix + "*")
	if len(qs) != 1 {
		t.Fatalf("quarantine files %v", qs)
	}
	if b, _ := os.ReadFile(qs[0]); !bytes.Equal(b, torn) {
		t.Fatalf("quarantine holds %q, want %q", b, torn)
	}
	if m := metricsText(t, base); !strings.Contains(m, `aepkimi_adapter_log_torn_tails_total{action="cut"} 1`) {
		t.Errorf("/metrics does not count the repair")
	}
}

// Links planted under the home where the hook token or the epoch belongs
// stop the adapter with a clear error; the targets stay as they were.
func TestPlantedLinksStopTheAdapter(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"hook.token", "epoch"} {
		t.Run(name, func(t *testing.T) {
			home := t.TempDir()
			link := safefiletest.Plant(t, filepath.Join(kimiDir(home), name))
			_, err := NewServer(Config{Config: emitter.Config{Home: home}, Listen: "127.0.0.1:0"})
			if !errors.Is(err, safefile.ErrLink) || !strings.Contains(err.Error(), link.Path) {
				t.Fatalf("err %v, want a refused link naming %s", err, link.Path)
			}
			link.Untouched(t)
		})
	}
}

// A link planted where a session's log belongs is refused and counted as a
// failed append; nothing reaches its target.
func TestPlantedLogLinkRefused(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	s := newTestServer(t, home, nil)
	link := safefiletest.Plant(t, filepath.Join(logDir(home), LogFileName("linked")))
	base := runServer(t, s)
	post(t, base+"/hook", s.token, "application/json", []byte(`{"hook_event_name":"SessionStart","session_id":"linked","source":"startup"}`))
	link.Untouched(t)
	if m := metricsText(t, base); !strings.Contains(m, "aepkimi_adapter_log_errors_total 1") {
		t.Errorf("the refused append is not counted")
	}
}

// Existing directories under the home are tightened to 0700.
func TestHomeDirectoriesTightened(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("no Unix modes")
	}
	home := t.TempDir()
	dirs := []string{kimiDir(home), spool.Dir(home), spool.QuarantinePath(spool.Dir(home)), filepath.Dir(logDir(home)), logDir(home)}
	for _, d := range dirs {
		os.MkdirAll(d, 0o755)
		os.Chmod(d, 0o755)
	}
	newTestServer(t, home, nil)
	for _, d := range dirs {
		if st, _ := os.Stat(d); st.Mode().Perm() != 0o700 {
			t.Errorf("%s mode %v", d, st.Mode().Perm())
		}
	}
}

// Quarantined raw payloads are bounded by age and counted.
func TestSpoolQuarantineBounded(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dir := spool.Dir(home)
	for i, p := range []string{"old garbage", "new garbage"} {
		if _, _, err := spool.Append(dir, spool.Header{Delivery: "q" + string(rune('a'+i)), Reason: "unreachable"}, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	s := newTestServer(t, home, nil)
	base := runServer(t, s) // ingests both at start: both quarantined
	qs, _ := spool.ListQuarantine(dir)
	if len(qs) != 2 || qs[0].Reason != "not a JSON object" {
		t.Fatalf("quarantine %+v", qs)
	}
	old := time.Now().Add(-spool.QuarantineMaxAge - time.Hour)
	os.Chtimes(qs[0].Path, old, old)
	s.spoolMu.Lock()
	s.pruneQuarantine(true)
	s.spoolMu.Unlock()
	left, _ := spool.ListQuarantine(dir)
	if len(left) != 1 || left[0].Path != qs[1].Path {
		t.Fatalf("left %+v", left)
	}
	m := metricsText(t, base)
	for _, want := range []string{`aepkimi_adapter_spool_quarantine_pruned_total{bound="age"} 1`,
		"aepkimi_adapter_spool_quarantine_records 1", "aepkimi_adapter_spool_quarantine_bytes " + strconv.FormatInt(left[0].Size, 10)} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
