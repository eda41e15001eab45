package main

// End-to-end tests: the real binaries (aep-kimi relay and adapter, kimi-hook),
// real sockets, and the real Kimi Code CLI driven through internal/testkit/kimiharness
// against its scripted mock LLM provider. They install Kimi once (npm); they
// skip when that fails, and fail under CI.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// binaries builds aep-kimi, kimi-hook and aep-setup once per test run.
// Every test that runs them is end-to-end and skips under -short.
func binaries(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs the binaries; skipped under -short")
	}
	binOnce.Do(func() {
		root, err := fixtures.ModuleRoot()
		if err != nil {
			binErr = err
			return
		}
		binDir, binErr = os.MkdirTemp("", "aep-kimi-e2e-bin")
		if binErr != nil {
			return
		}
		binErr = proctest.GoBuild(context.Background(), root, binDir+string(filepath.Separator), "./cmd/aep-kimi", "./cmd/kimi-hook", "./cmd/aep-setup")
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

// startDaemon runs `aep-kimi ARGS...` with env and waits for its /healthz.
func startDaemon(t testing.TB, base string, env []string, args ...string) *proctest.Proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(binaries(t), "aep-kimi"), args...)
	// A daemon never reads or writes the developer's own home: without an
	// AEP_HOME of the test's it gets a fresh one (a restart that must find
	// its predecessor's files passes the same AEP_HOME).
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "AEP_HOME=") }) {
		env = append([]string{"AEP_HOME=" + t.TempDir()}, env...)
	}
	cmd.Env = append(os.Environ(), env...)
	return startProc(t, base, cmd, args[0])
}

// startProc starts cmd (an aep-kimi daemon, perhaps behind a wrapper that
// execs it) and waits for its /healthz at base.
func startProc(t testing.TB, base string, cmd *exec.Cmd, name string) *proctest.Proc {
	t.Helper()
	d := proctest.Start(t, "aep-kimi "+name, cmd)
	// The port came from netaddr.FreePort: another test's daemon may have taken it
	// meanwhile and be the one answering, so this daemon must also say it
	// listens there.
	// (It may listen on all interfaces for a loopback base: match the port.)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	listening := regexp.MustCompile(` addr=\S*:` + regexp.QuoteMeta(u.Port()) + `\s`)
	d.Await(t, 20*time.Second, "its /healthz and its listen line", func() bool {
		return proctest.Answers(base+"/healthz") && listening.MatchString(d.Logs.String())
	})
	return d
}

// stack is a relay plus an adapter publishing to it, as a user runs them.
type stack struct {
	home, token      string
	relay, adapter   *proctest.Proc
	relayURL, hookTo string
	adapterEnv       []string
	adapterPort      int
	relayPort        int
}

// newUpStack is a stack with a fresh token and home for one `aep-kimi up`
// (relay and adapter in one process), its ports chosen and nothing running
// yet: a test registers the hook (st.hookTo) before st.up starts it.
func newUpStack(t testing.TB) *stack {
	t.Helper()
	st := &stack{home: t.TempDir(), token: "e2e-" + aep.NewID()}
	st.relayPort, st.adapterPort = netaddr.FreePort(t), netaddr.FreePort(t)
	st.relayURL = fmt.Sprintf("http://127.0.0.1:%d", st.relayPort)
	st.hookTo = fmt.Sprintf("http://127.0.0.1:%d", st.adapterPort)
	return st
}

// up starts `aep-kimi up` on the stack's ports, home and token, with env
// added and args after its listen flags, as st.relay.
func (st *stack) up(t testing.TB, env []string, args ...string) *proctest.Proc {
	t.Helper()
	env = append([]string{"AEP_TOKEN=" + st.token, "AEP_HOME=" + st.home}, env...)
	args = append([]string{"up", "--relay-listen", fmt.Sprintf("127.0.0.1:%d", st.relayPort),
		"--adapter-listen", fmt.Sprintf("127.0.0.1:%d", st.adapterPort)}, args...)
	st.relay = startDaemon(t, st.hookTo, env, args...)
	return st.relay
}

func startStack(t testing.TB, adapterEnv ...string) *stack {
	t.Helper()
	return newStack(t).withAdapter(t, adapterEnv...)
}

// newStack is a stack with a fresh token and home and only its relay
// running, on the memory store unless relayEnv says otherwise (AEP_STORE).
func newStack(t testing.TB, relayEnv ...string) *stack {
	t.Helper()
	st := &stack{home: t.TempDir(), token: "e2e-" + aep.NewID()}
	rport := netaddr.FreePort(t)
	st.relayURL = fmt.Sprintf("http://127.0.0.1:%d", rport)
	st.relay = startDaemon(t, st.relayURL, append([]string{"AEP_TOKEN=" + st.token, "AEP_HOME=" + st.home}, relayEnv...), "relay", "--listen", fmt.Sprintf("127.0.0.1:%d", rport))
	return st
}

// withAdapter starts the stack's adapter with adapterEnv added.
func (st *stack) withAdapter(t testing.TB, adapterEnv ...string) *stack {
	t.Helper()
	st.adapterPort = netaddr.FreePort(t)
	// Kimi's home is the test's own (no registration unless a test writes
	// one), never the user's.
	st.adapterEnv = append([]string{"AEP_TOKEN=" + st.token, "AEP_HOME=" + st.home, "KIMI_CODE_HOME=" + t.TempDir()}, adapterEnv...)
	st.startAdapter(t)
	return st
}

func (st *stack) startAdapter(t testing.TB) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", st.adapterPort)
	st.hookTo = "http://" + addr
	st.adapter = startDaemon(t, st.hookTo, st.adapterEnv, "adapter", "--listen", addr, "--relay", st.relayURL)
}

// hookCmd is the command Kimi runs for every hook.
func (st *stack) hookCmd(t testing.TB) string {
	return fmt.Sprintf("%s --daemon %s --home %s --timeout 10", filepath.Join(binaries(t), "kimi-hook"), st.hookTo, st.home)
}

// scenario runs one print-mode scenario (a name from the harness's
// scenarios, or a script file) with hookCmd on every hook; the run holds
// kimi's output and the mock that answered it.
func scenario(t testing.TB, kimi, name, hookCmd string) kimiharness.PrintRun {
	t.Helper()
	path := name
	if !strings.ContainsRune(name, filepath.Separator) {
		path = kimiharness.ScenarioFile(t, name)
	}
	r := kimiharness.RunPrint(t, kimi, path, hookCmd, 90*time.Second)
	if r.Err != nil && name != "stop-failure" {
		t.Fatalf("scenario %s: %v\n%s", name, r.Err, r.Output)
	}
	return r
}

// logsUntil reports whether cond came to hold over one session log's
// events within a minute.
func (st *stack) logsUntil(t testing.TB, cond func([]*aep.Event) bool) bool {
	t.Helper()
	return poll.Until(60*time.Second, func() bool {
		for _, b := range st.sessionLogs(t) {
			if cond(parseLines(t, wholeLines(b))) {
				return true
			}
		}
		return false
	})
}

// sessionLogs returns every session log in the stack's home, by session file.
func (st *stack) sessionLogs(t testing.TB) map[string][]byte {
	t.Helper()
	dir := filepath.Join(st.home, "logs", "kimi-code")
	entries, _ := os.ReadDir(dir)
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// wholeLines is b up to its last line end: a log read while its writer
// appends may end in part of a line, which a poll reads whole next time.
func wholeLines(b []byte) []byte { return b[:bytes.LastIndexByte(b, '\n')+1] }

func parseLines(t testing.TB, b []byte) []*aep.Event {
	t.Helper()
	var out []*aep.Event
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		if len(line) == 0 {
			continue
		}
		e, err := aep.ParseEvent(line)
		if err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		out = append(out, e)
	}
	return out
}

// relayEvents replays a session from the relay over SSE (from=all, filtered
// to the session) and returns the data lines.
func (st *stack) relayEvents(t testing.TB, session string) [][]byte {
	t.Helper()
	filter, _ := json.Marshal(map[string]string{"session": session})
	u := st.relayURL + "/stream?from=all&filter=" + url.QueryEscape(string(filter))
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+st.token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	var out [][]byte
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "data: ") {
			out = append(out, []byte(strings.TrimPrefix(line, "data: ")))
		}
	}
	return out
}

// validateWithCLI runs `aep-kimi validate` on a file and fails on violations.
func validateWithCLI(t testing.TB, path string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(binaries(t), "aep-kimi"), "validate", path).CombinedOutput()
	if err != nil {
		t.Fatalf("aep-kimi validate %s: %v\n%s", path, err, out)
	}
}

// waitQuiet waits until the log stops growing, the spool is empty and no
// session is live (Kimi has exited: every session ends within seconds).
func (st *stack) waitQuiet(t testing.TB) {
	t.Helper()
	last, stable := -1, 0
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if st.liveSessions(t) > 0 {
			stable = 0
			time.Sleep(250 * time.Millisecond)
			continue
		}
		n := 0
		for _, b := range st.sessionLogs(t) {
			n += bytes.Count(b, []byte("\n"))
		}
		spooled, _ := os.ReadDir(filepath.Join(st.home, "kimi", "spool"))
		pending := 0
		for _, e := range spooled {
			if strings.HasSuffix(e.Name(), ".hook") {
				pending++
			}
		}
		if n == last && pending == 0 {
			stable++
			if stable >= 4 {
				return
			}
		} else {
			stable = 0
		}
		last = n
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatal("the adapter never went quiet")
}

// liveSessions is how many sessions the adapter's /healthz reports live.
func (st *stack) liveSessions(t testing.TB) int {
	t.Helper()
	resp, err := http.Get(st.hookTo + "/healthz")
	if err != nil {
		return 0 // the adapter is down: nothing it could end now
	}
	defer resp.Body.Close()
	var h adapter.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatalf("healthz: %v", err)
	}
	return h.Channel.Sessions[adapter.ChannelActive] + h.Channel.Sessions[adapter.ChannelStale]
}

// oneSession returns the only session log's name and events.
func (st *stack) oneSession(t testing.TB) (string, []byte, []*aep.Event) {
	t.Helper()
	logs := st.sessionLogs(t)
	if len(logs) != 1 {
		names := make([]string, 0, len(logs))
		for n := range logs {
			names = append(names, n)
		}
		t.Fatalf("want one session log, have %v", names)
	}
	for name, b := range logs {
		return name, b, parseLines(t, b)
	}
	return "", nil, nil
}

func typeCounts(ev []*aep.Event) map[string]int {
	m := map[string]int{}
	for _, e := range ev {
		m[e.Type]++
	}
	return m
}

func dataOf(e *aep.Event) map[string]any {
	d, _ := e.DataMap()
	return d
}

// sameOnRelay asserts the relay holds exactly the log's events, byte for byte.
func (st *stack) sameOnRelay(t testing.TB, logBytes []byte, session string) {
	t.Helper()
	var fromRelay [][]byte
	want := bytes.Split(bytes.TrimSpace(logBytes), []byte("\n"))
	poll.Until(10*time.Second, func() bool {
		fromRelay = st.relayEvents(t, session)
		return len(fromRelay) >= len(want)
	})
	if len(fromRelay) != len(want) {
		t.Fatalf("relay holds %d events, the log %d", len(fromRelay), len(want))
	}
	// The relay orders by (epoch, seq) and the log by write: compare as sets
	// of exact lines, then check the relay's order is the log's.
	for i := range want {
		if !bytes.Equal(want[i], fromRelay[i]) {
			t.Fatalf("event %d differs between log and relay:\nlog:   %s\nrelay: %s", i, want[i], fromRelay[i])
		}
	}
}

func TestE2EPrintScenarios(t *testing.T) {
	kimi := kimiharness.Require(t)
	cases := []struct {
		name  string
		check func(t *testing.T, ev []*aep.Event)
	}{
		{"basic", func(t *testing.T, ev []*aep.Event) {
			want(t, ev, map[string]int{"session.started": 1, "run.started": 1, "run.finished": 1, "tool.requested": 1, "tool.completed": 1})
		}},
		{"tool-failure", func(t *testing.T, ev []*aep.Event) {
			want(t, ev, map[string]int{"run.started": 1, "run.finished": 1, "tool.requested": 2, "tool.failed": 2})
		}},
		{"subagent", func(t *testing.T, ev []*aep.Event) {
			want(t, ev, map[string]int{"run.started": 1, "run.finished": 1, "delegation.subagent.started": 1,
				"delegation.subagent.stopped": 1, "x.kimi-code.run.subagent_turn_ended": 1, "tool.requested": 2, "tool.completed": 2})
		}},
		{"background", func(t *testing.T, ev []*aep.Event) {
			want(t, ev, map[string]int{"run.started": 2, "run.finished": 2, "progress.status": 1})
		}},
		{"compact", func(t *testing.T, ev []*aep.Event) {
			want(t, ev, map[string]int{"run.started": 1, "run.finished": 1, "session.compacted": 1})
		}},
		{"stop-failure", func(t *testing.T, ev []*aep.Event) {
			want(t, ev, map[string]int{"run.started": 1, "run.failed": 1, "run.finished": 0})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := startStack(t)
			scenario(t, kimi, c.name, st.hookCmd(t))
			st.waitQuiet(t)
			name, raw, ev := st.oneSession(t)
			validateWithCLI(t, filepath.Join(st.home, "logs", "kimi-code", name))
			c.check(t, ev)
			pairedTools(t, ev)
			st.sameOnRelay(t, raw, ev[0].Session)
		})
	}
}

func want(t *testing.T, ev []*aep.Event, counts map[string]int) {
	t.Helper()
	got := typeCounts(ev)
	for typ, n := range counts {
		if got[typ] != n {
			t.Errorf("%d %s, want %d (stream: %v)", got[typ], typ, n, got)
		}
	}
}

// pairedTools: every tool result is caused by the request of the same call.
func pairedTools(t *testing.T, ev []*aep.Event) {
	t.Helper()
	req := map[string]string{}
	for _, e := range ev {
		tool, _ := dataOf(e)["tool"].(map[string]any)
		id, _ := tool["call_id"].(string)
		switch e.Type {
		case "tool.requested":
			req[id] = e.ID
		case "tool.completed", "tool.failed":
			if e.Cause == "" || e.Cause != req[id] {
				t.Errorf("%s of %s not caused by its request", e.Type, id)
			}
		}
	}
}

// The kimi web scenario: an approved permission pair, a manual compaction, a
// prompt queued behind a slow one that the user aborts, a rejected permission,
// and the archive that ends the session.
func TestE2EWebScenario(t *testing.T) {
	kimi := kimiharness.Require(t)
	st := startStack(t)
	mock := kimiharness.StartMock(t, kimiharness.ScenarioFile(t, "web"))
	home := t.TempDir()
	kimiharness.WriteConfig(t, home, mock.Port, st.hookCmd(t))
	web := kimiharness.StartWeb(t, kimi, home, t.TempDir())
	kimiharness.DriveWeb(t, web, false)
	web.Stop(t)
	st.waitQuiet(t)
	name, raw, ev := st.oneSession(t)
	validateWithCLI(t, filepath.Join(st.home, "logs", "kimi-code", name))
	want(t, ev, map[string]int{"run.started": 4, "run.finished": 3, "run.cancelled": 1, "attention.requested": 2,
		"attention.answered": 2, "attention.resolved": 2, "tool.denied": 1, "session.compacted": 1, "session.ended": 1})
	var terms []string
	for _, e := range ev {
		if aep.IsRunTerminal(e.Type) {
			terms = append(terms, e.Type)
		}
		if e.Type == "run.cancelled" && dataOf(e)["by"] != "user" {
			t.Errorf("the aborted run is cancelled by %v, want user", dataOf(e)["by"])
		}
	}
	if got := strings.Join(terms, ","); got != "run.finished,run.cancelled,run.finished,run.finished" {
		t.Errorf("run terminals %s", got)
	}
	if ev[len(ev)-1].Type != "session.ended" {
		t.Errorf("last event %s", ev[len(ev)-1].Type)
	}
	pairedTools(t, ev)
	st.sameOnRelay(t, raw, ev[0].Session)
}

// slowScenario is a print-mode session long enough to crash things in: six
// tool calls, each answered after a delay.
func slowScenario(t testing.TB, marker string) string {
	t.Helper()
	var responses []map[string]any
	for i := 0; i < 6; i++ {
		responses = append(responses, map[string]any{"delay": 0.4,
			"tool_calls": []map[string]any{{"name": "Bash", "arguments": map[string]any{"command": fmt.Sprintf("echo %s-%d", marker, i)}}}})
	}
	responses = append(responses, map[string]any{"text": "done"})
	b, _ := json.Marshal(map[string]any{"prompt": "Run the six probes.", "responses": responses})
	path := filepath.Join(t.TempDir(), "slow.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// kill -9 of the adapter in the middle of a hook sequence while hooks keep
// firing, then a restart: the log holds every event, in hook order, valid.
func TestE2EAdapterKill9(t *testing.T) {
	kimi := kimiharness.Require(t)
	st := startStack(t)
	sc := slowScenario(t, "k9")
	done := make(chan kimiharness.PrintRun, 1)
	go func() { done <- scenario(t, kimi, sc, st.hookCmd(t)) }()
	// Crash it once the run is under way, keep it down while hooks fire
	// (they spool), then bring it back.
	waitLog(t, st, func(ev []*aep.Event) bool { return typeCounts(ev)["tool.requested"] >= 2 })
	st.adapter.Kill()
	time.Sleep(1200 * time.Millisecond)
	st.startAdapter(t)
	<-done
	st.waitQuiet(t)
	name, raw, ev := st.oneSession(t)
	validateWithCLI(t, filepath.Join(st.home, "logs", "kimi-code", name))
	want(t, ev, map[string]int{"session.started": 1, "run.started": 1, "run.finished": 1, "tool.requested": 6, "tool.completed": 6, "session.ended": 1})
	pairedTools(t, ev)
	// Hook order: each tool's request precedes its result, the run opens
	// first and finishes before the session ends (Kimi's exit, observed by
	// the restarted adapter), and there are two epochs.
	epochs := map[int64]bool{}
	for _, e := range ev {
		epochs[e.EpochOrZero()] = true
	}
	if len(epochs) != 2 {
		t.Errorf("%d epochs, want 2 (one per adapter run)", len(epochs))
	}
	if ev[1].Type != "run.started" || ev[len(ev)-2].Type != "run.finished" || ev[len(ev)-1].Type != "session.ended" {
		t.Errorf("run does not wrap the session: %s ... %s, %s", ev[1].Type, ev[len(ev)-2].Type, ev[len(ev)-1].Type)
	}
	spooled := 0
	for _, e := range ev {
		if _, ok := e.Ext[adapter.ExtSpooled]; ok {
			spooled++
		}
	}
	if spooled == 0 {
		t.Error("no event came through the spool: the crash window caught nothing")
	}
	st.sameOnRelay(t, raw, ev[0].Session)
}

// The relay down for part of a session, then back: the relay ends with every
// event.
func TestE2ERelayOutage(t *testing.T) {
	kimi := kimiharness.Require(t)
	st := startStack(t)
	sc := slowScenario(t, "outage")
	done := make(chan kimiharness.PrintRun, 1)
	go func() { done <- scenario(t, kimi, sc, st.hookCmd(t)) }()
	waitLog(t, st, func(ev []*aep.Event) bool { return typeCounts(ev)["tool.requested"] >= 2 })
	st.relay.Kill()
	time.Sleep(1200 * time.Millisecond)
	port := strings.TrimPrefix(st.relayURL, "http://127.0.0.1:")
	st.relay = startDaemon(t, st.relayURL, []string{"AEP_TOKEN=" + st.token, "AEP_HOME=" + st.home}, "relay", "--listen", "127.0.0.1:"+port)
	<-done
	st.waitQuiet(t)
	_, raw, ev := st.oneSession(t)
	want(t, ev, map[string]int{"run.started": 1, "run.finished": 1, "tool.requested": 6, "tool.completed": 6})
	st.sameOnRelay(t, raw, ev[0].Session)
}

func waitLog(t testing.TB, st *stack, cond func([]*aep.Event) bool) {
	t.Helper()
	if !st.logsUntil(t, cond) {
		t.Fatal("the session never got there")
	}
}

// At the default capture posture, secrets planted in the prompt, tool input
// and tool output never reach the log or the relay.
func TestE2ESecretsNeverLeave(t *testing.T) {
	kimi := kimiharness.Require(t)
	st := startStack(t)
	secrets := []string{"AKIAIOSFODNN7EXAMPLE", "hunter2sequel", "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "sk-proj-AbCdEf123456GhIjKl789012"}
	sc := map[string]any{
		"prompt": "Deploy with AKIAIOSFODNN7EXAMPLE and password=hunter2sequel",
		"responses": []map[string]any{
			{"tool_calls": []map[string]any{{"name": "Bash", "arguments": map[string]any{
				"command": "echo ghp_AbCdEfGhIjKlMnOpQrStUvWxYz012345 sk-proj-AbCdEf123456GhIjKl789012"}}}},
			{"text": "done"},
		},
	}
	b, _ := json.Marshal(sc)
	path := filepath.Join(t.TempDir(), "secrets.json")
	os.WriteFile(path, b, 0o600)
	scenario(t, kimi, path, st.hookCmd(t))
	st.waitQuiet(t)
	_, raw, ev := st.oneSession(t)
	if typeCounts(ev)["tool.completed"] != 1 {
		t.Fatalf("scenario did not run its tool: %v", typeCounts(ev))
	}
	relayed := bytes.Join(st.relayEvents(t, ev[0].Session), []byte("\n"))
	for _, s := range secrets {
		if bytes.Contains(raw, []byte(s)) {
			t.Errorf("secret %q in the log", s)
		}
		if bytes.Contains(relayed, []byte(s)) {
			t.Errorf("secret %q on the relay", s)
		}
	}
}
