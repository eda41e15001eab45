// Package stacktest is the end-to-end suite's harness: the real binaries
// built once per source tree, daemons started on free loopback ports and
// awaited, a relay with an adapter or bridge-web (Stack, WebStack), the real
// Kimi driven through kimiharness, and the checks the tests share on what
// reached the session logs and the relay.
package stacktest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
)

// StartDaemon runs `aep-kimi ARGS...` with env and waits for its /healthz.
func StartDaemon(t testing.TB, base string, env []string, args ...string) *proctest.Proc {
	t.Helper()
	cmd := exec.Command(filepath.Join(Binaries(t), "aep-kimi"), args...)
	// A daemon never reads or writes the developer's own home: without an
	// AEP_HOME of the test's it gets a fresh one (a restart that must find
	// its predecessor's files passes the same AEP_HOME).
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "AEP_HOME=") }) {
		env = append([]string{"AEP_HOME=" + t.TempDir()}, env...)
	}
	cmd.Env = append(os.Environ(), env...)
	return StartProc(t, base, cmd, args[0])
}

// StartProc starts cmd (an aep-kimi daemon, perhaps behind a wrapper that
// execs it) and waits for its /healthz at base.
func StartProc(t testing.TB, base string, cmd *exec.Cmd, name string) *proctest.Proc {
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

// Stack is a relay plus an adapter publishing to it, as a user runs them.
type Stack struct {
	Home, Token      string
	Relay, Adapter   *proctest.Proc
	RelayURL, HookTo string
	AdapterEnv       []string
	AdapterPort      int
	RelayPort        int
}

// NewUpStack is a stack with a fresh token and home for one `aep-kimi up`
// (relay and adapter in one process), its ports chosen and nothing running
// yet: a test registers the hook (st.hookTo) before st.up starts it.
func NewUpStack(t testing.TB) *Stack {
	t.Helper()
	st := &Stack{Home: t.TempDir(), Token: "e2e-" + aep.NewID()}
	st.RelayPort, st.AdapterPort = netaddr.FreePort(t), netaddr.FreePort(t)
	st.RelayURL = fmt.Sprintf("http://127.0.0.1:%d", st.RelayPort)
	st.HookTo = fmt.Sprintf("http://127.0.0.1:%d", st.AdapterPort)
	return st
}

// Up starts `aep-kimi up` on the stack's ports, home and token, with env
// added and args after its listen flags, as st.relay.
func (st *Stack) Up(t testing.TB, env []string, args ...string) *proctest.Proc {
	t.Helper()
	env = append([]string{"AEP_TOKEN=" + st.Token, "AEP_HOME=" + st.Home}, env...)
	args = append([]string{"up", "--relay-listen", fmt.Sprintf("127.0.0.1:%d", st.RelayPort),
		"--adapter-listen", fmt.Sprintf("127.0.0.1:%d", st.AdapterPort)}, args...)
	st.Relay = StartDaemon(t, st.HookTo, env, args...)
	return st.Relay
}

func StartStack(t testing.TB, adapterEnv ...string) *Stack {
	t.Helper()
	return NewStack(t).WithAdapter(t, adapterEnv...)
}

// NewStack is a stack with a fresh token and home and only its relay
// running, on the memory store unless relayEnv says otherwise (AEP_STORE).
func NewStack(t testing.TB, relayEnv ...string) *Stack {
	t.Helper()
	st := &Stack{Home: t.TempDir(), Token: "e2e-" + aep.NewID()}
	rport := netaddr.FreePort(t)
	st.RelayURL = fmt.Sprintf("http://127.0.0.1:%d", rport)
	st.Relay = StartDaemon(t, st.RelayURL, append([]string{"AEP_TOKEN=" + st.Token, "AEP_HOME=" + st.Home}, relayEnv...), "relay", "--listen", fmt.Sprintf("127.0.0.1:%d", rport))
	return st
}

// WithAdapter starts the stack's adapter with adapterEnv added.
func (st *Stack) WithAdapter(t testing.TB, adapterEnv ...string) *Stack {
	t.Helper()
	st.AdapterPort = netaddr.FreePort(t)
	// Kimi's home is the test's own (no registration unless a test writes
	// one), never the user's.
	st.AdapterEnv = append([]string{"AEP_TOKEN=" + st.Token, "AEP_HOME=" + st.Home, "KIMI_CODE_HOME=" + t.TempDir()}, adapterEnv...)
	st.StartAdapter(t)
	return st
}

func (st *Stack) StartAdapter(t testing.TB) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", st.AdapterPort)
	st.HookTo = "http://" + addr
	st.Adapter = StartDaemon(t, st.HookTo, st.AdapterEnv, "adapter", "--listen", addr, "--relay", st.RelayURL)
}

// HookCmd is the command Kimi runs for every hook.
func (st *Stack) HookCmd(t testing.TB) string {
	return fmt.Sprintf("%s --daemon %s --home %s --timeout 10", filepath.Join(Binaries(t), "kimi-hook"), st.HookTo, st.Home)
}

// Async runs fn beside the test and has the test wait for it before it
// ends. fn may fail the test (t.Fatal there ends only its goroutine); a
// goroutine still running when its test returned would instead panic the
// whole test binary on its first failure, failing every test beside it.
func Async[T any](t testing.TB, fn func() T) <-chan T {
	out := make(chan T, 1)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		out <- fn()
	}()
	t.Cleanup(func() { <-finished })
	return out
}

// Scenario runs one print-mode scenario (a name from the harness's
// scenarios, or a script file) with hookCmd on every hook; the run holds
// kimi's output and the mock that answered it.
func Scenario(t testing.TB, kimi, name, hookCmd string) kimiharness.PrintRun {
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

// LogsUntil reports whether cond came to hold over one session log's
// Events within kimiharness.Patience.
func (st *Stack) LogsUntil(t testing.TB, cond func([]*aep.Event) bool) bool {
	t.Helper()
	return poll.Until(kimiharness.Patience, func() bool {
		for _, b := range st.SessionLogs(t) {
			if cond(ParseLines(t, WholeLines(b))) {
				return true
			}
		}
		return false
	})
}

// SessionLogs returns every session log in the stack's home, by session file.
func (st *Stack) SessionLogs(t testing.TB) map[string][]byte {
	t.Helper()
	dir := filepath.Join(st.Home, "logs", "kimi-code")
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

// WholeLines is b up to its last line end: a log read while its writer
// appends may end in part of a line, which a poll reads whole next time.
func WholeLines(b []byte) []byte { return b[:bytes.LastIndexByte(b, '\n')+1] }

func ParseLines(t testing.TB, b []byte) []*aep.Event {
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

// RelayEvents replays a session from the relay over SSE (from=all, filtered
// to the session) and returns the data lines.
func (st *Stack) RelayEvents(t testing.TB, session string) [][]byte {
	t.Helper()
	filter, _ := json.Marshal(map[string]string{"session": session})
	u := st.RelayURL + "/stream?from=all&filter=" + url.QueryEscape(string(filter))
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+st.Token)
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

// ValidateWithCLI runs `aep-kimi validate` on a file and fails on violations.
func ValidateWithCLI(t testing.TB, path string) {
	t.Helper()
	out, err := exec.Command(filepath.Join(Binaries(t), "aep-kimi"), "validate", path).CombinedOutput()
	if err != nil {
		t.Fatalf("aep-kimi validate %s: %v\n%s", path, err, out)
	}
}

// WaitQuiet waits until the log stops growing, the spool is empty and no
// Session is live (Kimi has exited: every session ends within seconds).
func (st *Stack) WaitQuiet(t testing.TB) {
	t.Helper()
	last, still := -1, time.Now()
	quiet := func() bool {
		if st.LiveSessions(t) > 0 {
			last = -1
			return false
		}
		n := 0
		for _, b := range st.SessionLogs(t) {
			n += bytes.Count(b, []byte("\n"))
		}
		pending := st.Spooled()
		if n != last || pending > 0 {
			last, still = n, time.Now()
			return false
		}
		return time.Since(still) >= quietFor
	}
	poll.Must(t, 30*time.Second, "the adapter to go quiet", quiet)
}

// quietFor is how long a log must stay the same size for WaitQuiet.
const quietFor = time.Second

// Spooled is how many hook records wait in the stack's spool.
func (st *Stack) Spooled() int {
	spooled, _ := os.ReadDir(spool.Dir(st.Home))
	n := 0
	for _, e := range spooled {
		if strings.HasSuffix(e.Name(), ".hook") {
			n++
		}
	}
	return n
}

// SpooledUnlogged is how many of the spool's records hold a delivery no
// session log has: payloads the adapter never took. A record of one it
// logged just before it died is a duplicate, which its next run drops.
func (st *Stack) SpooledUnlogged(t testing.TB) int {
	t.Helper()
	logged := map[string]bool{}
	for _, b := range st.SessionLogs(t) {
		for _, e := range ParseLines(t, WholeLines(b)) {
			if d, ok := e.ExtString(adapter.ExtDelivery); ok {
				logged[d] = true
			}
		}
	}
	files, _ := spool.List(spool.Dir(st.Home))
	n := 0
	for _, f := range files {
		if rec, err := spool.Read(f); err == nil && !logged[rec.Delivery] {
			n++
		}
	}
	return n
}

// Subscriptions is the relay's count of live subscriptions.
func (st *Stack) Subscriptions(t testing.TB) float64 {
	t.Helper()
	res, err := httpcall.Try(httpcall.Request{URL: st.RelayURL + "/metrics", Token: st.Token})
	if err != nil {
		return -1
	}
	return MetricValue(string(res.Body), "aepkimi_relay_subscriptions")
}

// AwaitSubscriber waits until the relay has more live subscriptions than
// before: a consumer started since has connected.
func (st *Stack) AwaitSubscriber(t testing.TB, before float64) {
	t.Helper()
	poll.Must(t, 20*time.Second, "a new subscription on the relay", func() bool { return st.Subscriptions(t) > before })
}

// LiveSessions is how many sessions the adapter's /healthz reports live.
func (st *Stack) LiveSessions(t testing.TB) int {
	t.Helper()
	res, err := httpcall.Try(httpcall.Request{URL: st.HookTo + "/healthz"})
	if err != nil {
		return 0 // the adapter is down: nothing it could end now
	}
	var h adapter.Health
	res.JSON(t, &h)
	return h.Channel.Sessions[adapter.ChannelActive] + h.Channel.Sessions[adapter.ChannelStale]
}

// OneSession returns the only session log's name and events.
func (st *Stack) OneSession(t testing.TB) (string, []byte, []*aep.Event) {
	t.Helper()
	logs := st.SessionLogs(t)
	if len(logs) != 1 {
		names := make([]string, 0, len(logs))
		for n := range logs {
			names = append(names, n)
		}
		t.Fatalf("want one session log, have %v", names)
	}
	for name, b := range logs {
		return name, b, ParseLines(t, b)
	}
	return "", nil, nil
}

func TypeCounts(ev []*aep.Event) map[string]int {
	m := map[string]int{}
	for _, e := range ev {
		m[e.Type]++
	}
	return m
}

func DataOf(e *aep.Event) map[string]any {
	d, _ := e.DataMap()
	return d
}

// SameOnRelay asserts the relay holds exactly the log's events, byte for byte.
func (st *Stack) SameOnRelay(t testing.TB, logBytes []byte, session string) {
	t.Helper()
	var fromRelay [][]byte
	want := bytes.Split(bytes.TrimSpace(logBytes), []byte("\n"))
	poll.Until(10*time.Second, func() bool {
		fromRelay = st.RelayEvents(t, session)
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

func Want(t *testing.T, ev []*aep.Event, counts map[string]int) {
	t.Helper()
	got := TypeCounts(ev)
	bad := false
	for typ, n := range counts {
		if got[typ] != n {
			t.Errorf("%d %s, want %d (stream: %v)", got[typ], typ, n, got)
			bad = true
		}
	}
	if bad {
		t.Logf("the stream, event by event:\n%s", Describe(ev))
	}
}

// Describe is one line per event: what a count's mismatch needs to be
// read (which call, which delivery, through the spool or not, which
// adapter run).
func Describe(ev []*aep.Event) string {
	var b strings.Builder
	for _, e := range ev {
		tool, _ := DataOf(e)["tool"].(map[string]any)
		call, _ := tool["call_id"].(string)
		seq := int64(-1)
		if e.Seq != nil {
			seq = *e.Seq
		}
		fmt.Fprintf(&b, "  epoch %d seq %d %s %s run=%s cause=%s call=%s", e.EpochOrZero(), seq, e.Time, e.Type, e.Run, e.Cause, call)
		names := slices.Sorted(maps.Keys(e.Ext))
		for _, name := range names {
			fmt.Fprintf(&b, " %s=%s", name, e.Ext[name])
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// PairedTools: every tool result is caused by the request of the same call.
func PairedTools(t *testing.T, ev []*aep.Event) {
	t.Helper()
	req := map[string]string{}
	for _, e := range ev {
		tool, _ := DataOf(e)["tool"].(map[string]any)
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

// SlowScenario is a print-mode session long enough to crash things in: six
// tool calls, each answered after a delay.
func SlowScenario(t testing.TB, marker string) string {
	t.Helper()
	var responses []map[string]any
	for i := 0; i < 6; i++ {
		responses = append(responses, map[string]any{"delay": 0.4,
			"tool_calls": []map[string]any{{"name": "Bash", "arguments": map[string]any{"command": fmt.Sprintf("echo %s-%d", marker, i)}}}})
	}
	// The last answer waits too. Kimi ends the turn's PostToolUse hooks
	// when the turn ends, and one still starting then is lost (a machine
	// too loaded to run it for that long; docs/durability.md): tests that
	// count every result give the last tool's hook the time the others get.
	responses = append(responses, map[string]any{"delay": 0.4, "text": "done"})
	b, _ := json.Marshal(map[string]any{"prompt": "Run the six probes.", "responses": responses})
	path := filepath.Join(t.TempDir(), "slow.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func WaitLog(t testing.TB, st *Stack, cond func([]*aep.Event) bool) {
	t.Helper()
	if !st.LogsUntil(t, cond) {
		t.Fatal("the session never got there")
	}
}
