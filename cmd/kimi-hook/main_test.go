package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/testkit/emittertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/mapping"
)

var hookBin string

// TestMain builds the real kimi-hook once, unless -short skips every test
// that runs it.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "kimi-hook-test")
	if err != nil {
		panic(err)
	}
	hookBin = filepath.Join(dir, "kimi-hook")
	if err := proctest.GoBuild(context.Background(), ".", hookBin, "."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// startAdapter runs a real adapter on loopback; mod adjusts its config.
func startAdapter(t *testing.T, home string, mod ...func(*adapter.Config)) (*adapter.Server, string) {
	t.Helper()
	s, base, _ := runAdapter(t, home, mod...)
	return s, base
}

// runAdapter is startAdapter that also returns stop, which returns once
// the adapter has drained and stopped.
func runAdapter(t *testing.T, home string, mod ...func(*adapter.Config)) (*adapter.Server, string, func()) {
	t.Helper()
	cfg := adapter.Config{Config: emitter.Config{Home: home, Posture: mapping.DefaultPosture(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, Listen: "127.0.0.1:0", SpoolPoll: 50 * time.Millisecond, SpoolGrace: 300 * time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	s, err := adapter.NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := s.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	<-s.Ready()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return s, "http://" + addr.String(), stop
}

// hookBinary is the built kimi-hook; the tests that run it are end-to-end
// and skip under -short.
func hookBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: runs the built kimi-hook; skipped under -short")
	}
	return hookBin
}

// hook runs kimi-hook the way Kimi does: sh -c, payload on stdin.
func hook(t *testing.T, daemon, home, payload string, extra ...string) (string, string, int) {
	t.Helper()
	args := append([]string{"--daemon", daemon, "--home", home, "--timeout", "10"}, extra...)
	cmd := exec.Command(hookBinary(t), args...)
	cmd.Stdin = strings.NewReader(payload)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func logLines(t *testing.T, home, session string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "logs", "kimi-code", adapter.LogFileName(session)))
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// hookWait bounds every wait: generous, CI machines can be loaded.
const hookWait = 20 * time.Second

const startPayload = `{"hook_event_name":"SessionStart","session_id":"kh1","cwd":"/tmp","client_type":"kimi_code_cli","source":"startup"}`

func TestDeliversAndPrintsNothing(t *testing.T) {
	home := t.TempDir()
	_, base := startAdapter(t, home)
	out, errOut, code := hook(t, base, home, startPayload)
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
	}
	if lines := logLines(t, home, "kh1"); len(lines) != 1 || !strings.Contains(lines[0], `"type":"session.started"`) {
		t.Fatalf("log: %v", lines)
	}
	// A fire-and-forget hook is written ahead to the spool, delivered, and
	// its spool record removed.
	post := `{"hook_event_name":"PostToolUse","session_id":"kh1","tool_name":"Bash","tool_input":{"command":"echo"},"tool_call_id":"c1","tool_output":"x"}`
	if out, _, code := hook(t, base, home, post); code != 0 || out != "" {
		t.Fatalf("post: exit %d out %q", code, out)
	}
	if lines := logLines(t, home, "kh1"); len(lines) != 2 {
		t.Fatalf("log: %v", lines)
	}
	if files, _ := spool.List(spool.Dir(home)); len(files) != 0 {
		t.Fatalf("delivered record left in the spool: %v", files)
	}
}

func TestSpoolsWhenAdapterDown(t *testing.T) {
	home := t.TempDir()
	// Nothing listens on this port.
	out, errOut, code := hook(t, "http://127.0.0.1:1", home, startPayload)
	if code != 0 || out != "" || errOut != "" {
		t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
	}
	files, _ := spool.List(spool.Dir(home))
	if len(files) != 1 {
		t.Fatalf("spool holds %d records", len(files))
	}
	rec, err := spool.Read(files[0])
	if err != nil || string(rec.Payload) != startPayload || rec.Reason != "unreachable" {
		t.Fatalf("record %+v err %v", rec.Header, err)
	}
	// The adapter ingests it when it starts.
	startAdapter(t, home)
	if lines := logLines(t, home, "kh1"); len(lines) != 1 || !strings.Contains(lines[0], `"kimispooled":true`) {
		t.Fatalf("log after start: %v", lines)
	}
}

func TestWrongTokenSpools(t *testing.T) {
	home := t.TempDir()
	_, base := startAdapter(t, home)
	other := t.TempDir() // a home with no token
	if _, _, code := hook(t, base, other, startPayload); code != 0 {
		t.Fatalf("exit %d", code)
	}
	files, _ := spool.List(spool.Dir(other))
	rec, _ := spool.Read(files[0])
	if len(files) != 1 || rec.Reason != "unauthorized" {
		t.Fatalf("spool %v reason %q", files, rec.Reason)
	}
}

func TestGarbageNeverBreaksTheAgent(t *testing.T) {
	home := t.TempDir()
	_, base := startAdapter(t, home)
	for _, in := range []string{"", "not json", `{"no":"name"}`, strings.Repeat("x", 5<<20)} {
		out, _, code := hook(t, base, home, in)
		if code != 0 || out != "" {
			t.Fatalf("input %.20q: exit %d out %q", in, code, out)
		}
	}
	// Bad flags still exit 0.
	if _, _, code := hook(t, base, home, startPayload, "--bogus"); code != 0 {
		t.Fatalf("bad flag: exit %d", code)
	}
}

// Kimi kills PostToolUse hooks at turn end: SIGTERM to the hook's process
// group, SIGKILL 100 ms later. A hook killed mid-delivery must not lose its
// payload: here every hook is killed while its delivery is in flight (the
// adapter holds the reply: a result whose request it has not seen waits in
// the reorder window), after the write-ahead record exists. The shell execs
// the hook, as bash does, so it leads the group and cannot leave it
// (TestFireAndForgetOutlivesTurnEndKill is the shell that forks). Every
// payload lands exactly once, and the spool drains.
func TestSurvivesTurnEndGroupKill(t *testing.T) {
	home := t.TempDir()
	_, base, stop := runAdapter(t, home)
	const n = 12
	for i := 0; i < n; i++ {
		payload := fmt.Sprintf(`{"hook_event_name":"PostToolUse","session_id":"kill","tool_name":"Bash","tool_input":{},"tool_call_id":"c%d","tool_output":"x"}`, i)
		before, _ := spool.List(spool.Dir(home))
		cmd := exec.Command("/bin/sh", "-c", "exec '"+hookBinary(t)+"' --daemon "+base+" --home '"+home+"' --timeout 10")
		cmd.Stdin = strings.NewReader(payload)
		kimiharness.OwnGroup(cmd)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		poll.Must(t, hookWait, "the write-ahead record", func() bool {
			now, _ := spool.List(spool.Dir(home))
			for _, f := range now {
				if !slices.Contains(before, f) {
					return true
				}
			}
			return false
		})
		// Kimi's SIGKILL follows its SIGTERM within 100 ms; at once is
		// the harder case, and the hook ignores SIGTERM either way.
		kimiharness.SignalGroup(cmd.Process, syscall.SIGTERM)
		kimiharness.SignalGroup(cmd.Process, syscall.SIGKILL)
		cmd.Wait()
	}
	poll.Must(t, hookWait, "every killed hook's payload, once", func() bool {
		files, _ := spool.List(spool.Dir(home))
		return len(logLines(t, home, "kill")) == n && len(files) == 0
	})
	// A straggler (a killed hook's delivery the adapter still held) is
	// written by the time the adapter has drained and stopped.
	stop()
	if got := len(logLines(t, home, "kill")); got != n {
		t.Fatalf("%d events for %d hooks", got, n)
	}
}

// The daemon must be an IP literal or localhost (kimi-hook links no
// resolver); anything else spools, still exit 0 and silent.
func TestHostnameDaemonSpools(t *testing.T) {
	home := t.TempDir()
	out, _, code := hook(t, "http://adapter.example:8398", home, startPayload)
	if code != 0 || out != "" {
		t.Fatalf("exit %d out %q", code, out)
	}
	if files, _ := spool.List(spool.Dir(home)); len(files) != 1 {
		t.Fatalf("spool holds %d records", len(files))
	}
}

// An adapter that cannot make a hook durable answers 503: a fire-and-forget
// hook's write-ahead record stays in the spool, an awaited hook is spooled
// and fails open (exit 0, nothing printed), and once the log can be written
// the adapter takes both from the spool, each once.
func TestNotDurableReplySpools(t *testing.T) {
	home := t.TempDir()
	_, base := startAdapter(t, home)
	const session = "kh-nd"
	logPath := filepath.Join(home, "logs", "kimi-code", adapter.LogFileName(session))
	if err := os.MkdirAll(logPath, 0o700); err != nil { // a directory where the log goes
		t.Fatal(err)
	}
	start := `{"hook_event_name":"SessionStart","session_id":"kh-nd","source":"startup"}`
	note := `{"hook_event_name":"Notification","session_id":"kh-nd","title":"t","message":"m"}`
	for _, p := range []string{start, note} {
		if out, errOut, code := hook(t, base, home, p); code != 0 || out != "" || errOut != "" {
			t.Fatalf("exit %d stdout %q stderr %q", code, out, errOut)
		}
	}
	files, _ := spool.List(spool.Dir(home))
	reasons := map[string]bool{}
	for _, f := range files {
		if rec, err := spool.Read(f); err == nil {
			reasons[rec.Reason] = true
		}
	}
	// The spool loop may already be retrying them; both stay either way.
	if len(files) != 2 || !reasons["not-durable"] || !reasons["pending"] {
		t.Fatalf("spool after not-durable replies: %d records, reasons %v", len(files), reasons)
	}
	if err := os.Remove(logPath); err != nil {
		t.Fatal(err)
	}
	poll.Must(t, hookWait, "the spool to drain into the log", func() bool {
		files, _ := spool.List(spool.Dir(home))
		return len(files) == 0 && len(logLines(t, home, session)) == 2
	})
	lines := logLines(t, home, session)
	if !strings.Contains(strings.Join(lines, "\n"), `"type":"session.started"`) {
		t.Fatalf("log: %v", lines)
	}
}

// kimi-hook declares how long it waits, and the adapter's gate answers
// within it: with a minute's hold and on-timeout deny, a hook whose Kimi
// timeout is 3 s gets the gate's deny before it would give up, and the
// margins agree.
func TestGateAnswersWithinTheHookWait(t *testing.T) {
	if margin != adapter.HookGiveUpMargin {
		t.Fatalf("kimi-hook gives up %s before Kimi's timeout, the adapter assumes %s", margin, adapter.HookGiveUpMargin)
	}
	home := t.TempDir()
	pub := &emittertest.Recorder{}
	_, base := startAdapter(t, home, func(c *adapter.Config) {
		c.Publisher = pub
		c.Control = adapter.Control{Gate: true, Authenticated: true, HoldTimeout: time.Minute, OnTimeout: "deny"}
	})
	pre := `{"hook_event_name":"PreToolUse","session_id":"kh-gate","tool_name":"Bash","tool_input":{"command":"rm -rf build"},"tool_call_id":"c1"}`
	start := time.Now()
	out, _, code := hook(t, base, home, pre, "--timeout", "3")
	took := time.Since(start)
	if code != 0 || !strings.Contains(out, `"permissionDecision":"deny"`) {
		t.Fatalf("exit %d, stdout %q after %s: the gate's deny never reached the hook", code, out, took)
	}
	if limit := 3*time.Second - margin; took >= limit {
		t.Fatalf("the hook took %s, past the %s it waits", took, limit)
	}
	if files, _ := spool.List(spool.Dir(home)); len(files) != 0 {
		t.Fatalf("the hook gave up and spooled: %v", files)
	}
}

// Kimi stops waiting for a held PreToolUse with a SIGTERM to the hook's
// group (its hook timeout, an interrupted turn): kimi-hook leaves at once,
// so the adapter records the request expired while Kimi proceeds, without
// waiting for the SIGKILL that follows 100 ms later.
func TestHeldHookLeavesOnSIGTERM(t *testing.T) {
	home := t.TempDir()
	pub := &emittertest.Recorder{}
	_, base := startAdapter(t, home, func(c *adapter.Config) {
		c.Publisher = pub
		c.Control = adapter.Control{Gate: true, Authenticated: true, HoldTimeout: time.Minute}
	})
	pre := `{"hook_event_name":"PreToolUse","session_id":"kh-term","tool_name":"Bash","tool_input":{"command":"ls"},"tool_call_id":"c1"}`
	cmd := exec.Command("/bin/sh", "-c", "'"+hookBinary(t)+"' --daemon "+base+" --home '"+home+"' --timeout 60")
	cmd.Stdin = strings.NewReader(pre)
	var out bytes.Buffer
	cmd.Stdout = &out
	kimiharness.OwnGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { kimiharness.SignalGroup(cmd.Process, syscall.SIGKILL); <-exited })
	poll.Must(t, hookWait, "the held request", func() bool { return len(pub.Find("attention.requested")) == 1 })
	sent := time.Now()
	kimiharness.SignalGroup(cmd.Process, syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(time.Second):
		t.Fatal("kimi-hook went on waiting after Kimi's SIGTERM")
	}
	waitExpired(t, pub, out.String())
	t.Logf("SIGTERM to the recorded expiry: %s", time.Since(sent))
}

// waitExpired waits for the adapter to record a held request expired after
// Kimi stopped waiting, and checks the hook printed nothing (out).
func waitExpired(t *testing.T, pub *emittertest.Recorder, out string) {
	t.Helper()
	pub.Wait(t, "the expiry", func(evs []*aep.Event) bool {
		for _, e := range evs {
			if e.Type == "attention.timeout" {
				return true
			}
		}
		return false
	})
	if out != "" {
		t.Fatalf("printed %q for a Kimi that stopped listening", out)
	}
}
