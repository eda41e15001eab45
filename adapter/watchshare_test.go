//go:build linux

package adapter

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/mapping"
)

// openFDs counts this process's descriptors, and among them the pidfds.
func openFDs(t *testing.T) (all, pidfds int) {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot list descriptors: %v", err)
	}
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.Contains(l, "pidfd") {
			pidfds++
		}
	}
	return len(ents), pidfds
}

// Many sessions naming one live process share one watch, one descriptor;
// all of them end when it is killed, and the descriptor is released.
func TestSessionsOfOneProcessShareAWatch(t *testing.T) {
	const n = 200
	home := t.TempDir()
	s := newTestServer(t, home, func(c *Config) { c.ExitGrace, c.MaxOpenLogs, c.Syncer = 100*time.Millisecond, 4, skipDiskFlush })
	base := runServer(t, s)
	_, pid0 := openFDs(t)
	cmd, p := child(t) // os/exec may hold a pidfd of its own for the child
	before, pidBefore := openFDs(t)
	for i := 0; i < n; i++ {
		postHook(t, base, s.token, hookPayload("SessionStart", fmt.Sprintf("share-%d", i), startExtra), p)
	}
	after, pidAfter := openFDs(t)
	t.Logf("%d sessions on one process: descriptors %d -> %d, pidfds %d -> %d", n, before, after, pidBefore, pidAfter)
	if pidAfter-pidBefore > 1 {
		t.Fatalf("%d sessions on one process hold %d pidfds, want 1", n, pidAfter-pidBefore)
	}
	m := metricsText(t, base)
	if !strings.Contains(m, "aepkimi_adapter_watched_processes 1\n") || !strings.Contains(m, fmt.Sprintf("aepkimi_adapter_watched_sessions %d\n", n)) {
		t.Fatalf("gauges:\n%s", grepLines(m, "watched_"))
	}
	cmd.Process.Kill()
	cmd.Wait()
	for i := 0; i < n; i++ {
		ev := waitFor(t, home, fmt.Sprintf("share-%d", i), 5*time.Second, ended)
		if reason, observed := endOf(t, ev); reason != mapping.EndNormal || observed != ObservedProcess {
			t.Fatalf("share-%d ended %q observed %q", i, reason, observed)
		}
	}
	if _, pids := openFDs(t); pids != pid0 {
		t.Fatalf("pidfds %d after every session ended and the child was reaped, want %d", pids, pid0)
	}
	if m := metricsText(t, base); !strings.Contains(m, "aepkimi_adapter_watched_processes 0\n") || !strings.Contains(m, "aepkimi_adapter_watched_sessions 0\n") {
		t.Fatalf("gauges after the exit:\n%s", grepLines(m, "watched_"))
	}
}

// The last session of a process to end releases its watch.
func TestLastSessionEndReleasesTheWatch(t *testing.T) {
	home := t.TempDir()
	s := newTestServer(t, home, nil)
	base := runServer(t, s)
	_, p := child(t)
	_, pidBefore := openFDs(t)
	for _, sid := range []string{"rel-a", "rel-b"} {
		postHook(t, base, s.token, hookPayload("SessionStart", sid, startExtra), p)
	}
	postHook(t, base, s.token, hookPayload("SessionEnd", "rel-a", `,"reason":"exit"`), p)
	if _, pids := openFDs(t); pids != pidBefore+1 {
		t.Fatalf("pidfds %d with one session left, want %d", pids, pidBefore+1)
	}
	postHook(t, base, s.token, hookPayload("SessionEnd", "rel-b", `,"reason":"exit"`), p)
	if _, pids := openFDs(t); pids != pidBefore {
		t.Fatalf("pidfds %d after the last session ended, want %d", pids, pidBefore)
	}
}

// Past MaxWatches a session naming another process falls back to silence,
// counted on /metrics; sessions of a process already watched still join it.
func TestWatchCapFallsBackToSilence(t *testing.T) {
	home := t.TempDir()
	s := newTestServer(t, home, func(c *Config) { c.MaxWatches, c.ExitGrace = 2, 100*time.Millisecond })
	base := runServer(t, s)
	var kids []procRef
	for i := 0; i < 3; i++ {
		_, p := child(t)
		kids = append(kids, p)
	}
	_, pidBefore := openFDs(t)
	postHook(t, base, s.token, hookPayload("SessionStart", "cap-0", startExtra), kids[0])
	postHook(t, base, s.token, hookPayload("SessionStart", "cap-1", startExtra), kids[1])
	postHook(t, base, s.token, hookPayload("SessionStart", "cap-2", startExtra), kids[2]) // over the cap
	postHook(t, base, s.token, hookPayload("SessionStart", "cap-3", startExtra), kids[2]) // over the cap
	postHook(t, base, s.token, hookPayload("SessionStart", "cap-0b", startExtra), kids[0])
	if _, pids := openFDs(t); pids != pidBefore+2 {
		t.Fatalf("pidfds %d, want %d (the cap)", pids, pidBefore+2)
	}
	m := metricsText(t, base)
	for _, want := range []string{"aepkimi_adapter_watched_processes 2\n", "aepkimi_adapter_watched_sessions 3\n", "aepkimi_adapter_watch_cap_fallbacks_total 2\n"} {
		if !strings.Contains(m, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, grepLines(m, "watch"))
		}
	}
	// The sessions past the cap are left to the silence sweep.
	s.life.mu.Lock()
	_, bound2 := s.life.bound["cap-2"]
	_, bound0 := s.life.bound["cap-0b"]
	s.life.mu.Unlock()
	if bound2 || !bound0 {
		t.Fatalf("cap-2 bound %v (want false), cap-0b bound %v (want true)", bound2, bound0)
	}
}

// A session evicted from memory still ends: one bound to a process when
// the process exits, one nobody watches after the idle limit.
func TestEvictedSessionsStillEnd(t *testing.T) {
	home := t.TempDir()
	clock := &lockedClock{t: time.Now()}
	s := newTestServer(t, home, func(c *Config) {
		c.MaxSessions, c.Now, c.ExitGrace = 2, clock.now, 100*time.Millisecond
		c.StaleAfter, c.IdleEnd = time.Minute, 10*time.Minute
	})
	cmd, p := child(t)
	hook := func(sid string, p procRef) {
		t.Helper()
		if _, _, err := s.ingest(&delivery{payload: hookPayload("SessionStart", sid, startExtra), at: clock.now(), proc: p}, false); err != nil {
			t.Fatal(err)
		}
		clock.add(time.Second)
	}
	hook("ev-watched", p)
	hook("ev-quiet", procRef{})
	hook("ev-x", procRef{})
	hook("ev-y", procRef{}) // evicts the two longest idle
	w, q := s.core.Has("ev-watched"), s.core.Has("ev-quiet")
	if w || q {
		t.Fatalf("still in memory: ev-watched %v, ev-quiet %v", w, q)
	}
	cmd.Process.Kill()
	cmd.Wait()
	ev := waitFor(t, home, "ev-watched", 5*time.Second, ended)
	if reason, observed := endOf(t, ev); reason != mapping.EndNormal || observed != ObservedProcess {
		t.Fatalf("evicted watched session ended %q observed %q", reason, observed)
	}
	// Inside the idle limit the evicted quiet session stays live.
	clock.add(5 * time.Minute)
	s.life.tick(s.Channel())
	if ev := readLog(t, home, "ev-quiet"); ended(ev) {
		t.Fatalf("ended inside the idle limit:\n%s", dump(ev))
	}
	clock.add(6 * time.Minute)
	s.life.tick(s.Channel())
	ev = readLog(t, home, "ev-quiet")
	if reason, observed := endOf(t, ev); reason != mapping.EndTimeout || observed != ObservedSilence {
		t.Fatalf("evicted quiet session ended %q observed %q", reason, observed)
	}
	assertValidStream(t, ev)
	for _, sid := range []string{"ev-x", "ev-y"} {
		if !ended(readLog(t, home, sid)) {
			t.Fatalf("%s did not end after the idle limit", sid)
		}
	}
	s.life.mu.Lock()
	away, bound := len(s.life.away), len(s.life.bound)
	s.life.mu.Unlock()
	if away != 0 || bound != 0 {
		t.Fatalf("tracked after every session ended: %d evicted, %d bound", away, bound)
	}
}

// lockedClock is a test clock read by the adapter's own goroutines.
type lockedClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *lockedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *lockedClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
