package main

// End-to-end tests of `aep-kimi bridge-web` against the real `kimi web`
// (kap-server) run by internal/testkit/kimiharness, driven over REST the way its web UI
// drives it (manual permission mode, the mock model), with the real relay in
// between and the real command senders (`aep-kimi respond`, `cancel`).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/bridgeweb"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// webScript is the mock model for these tests: a tool call needing approval
// on "run the probe" / "reject me", a reply after the tool result, and a slow
// answer to abort.
var webScript = map[string]any{
	"responses": []map[string]any{
		{"match": "rejected the approval", "text": "Understood, I did not run it.", "repeat": true},
		{"match": "probe-web", "text": "The command printed probe-web.", "repeat": true},
		{"match": "run the probe", "tool_calls": []map[string]any{{"name": "Bash", "arguments": map[string]any{"command": "echo probe-web"}}}, "repeat": true},
		{"match": "reject me", "tool_calls": []map[string]any{{"name": "Bash", "arguments": map[string]any{"command": "echo should-not-run"}}}, "repeat": true},
		{"match": "slow prompt", "delay": 30, "text": "too late", "repeat": true},
		// Outlasts a live checker run; only the checker's test asks for it.
		{"match": "checker turn", "delay": 120, "text": "too late", "repeat": true},
	},
	"default": map[string]any{"text": "(mock default)"},
}

// webStack is a kimi web server, a relay, and a bridge publishing to it.
type webStack struct {
	*stack // relayURL and token, for the shared relay helpers
	kimi   string
	mode   string
	home   string // AEP home
	khome  string // KIMI_CODE_HOME
	work   string
	web    *kimiharness.Web
	mock   *kimiharness.Mock
	bridge *proctest.Proc
	addr   string
	env    []string
}

func startWebStack(t *testing.T, mode string, env ...string) *webStack {
	t.Helper()
	return startWebStackOn(t, nil, mode, env...)
}

// startWebStackOn is startWebStack with relayEnv added to the relay's
// environment (AEP_STORE, AEP_BUFFER...).
func startWebStackOn(t *testing.T, relayEnv []string, mode string, env ...string) *webStack {
	t.Helper()
	kimi := kimiharness.Require(t)
	return startWebStackWith(t, kimi, kimiharness.WriteScript(t, webScript), relayEnv, mode, env...)
}

// startWebStackWith is startWebStackOn with the mock serving the script
// at path.
func startWebStackWith(t *testing.T, kimi, script string, relayEnv []string, mode string, env ...string) *webStack {
	t.Helper()
	mock := kimiharness.StartMock(t, script)
	ws := &webStack{kimi: kimi, mode: mode, home: t.TempDir(), khome: t.TempDir(), work: t.TempDir(), mock: mock}
	kimiharness.WriteWebConfig(t, ws.khome, mock.Port)
	ws.web = kimiharness.StartWeb(t, kimi, ws.khome, ws.work)
	ws.stack = newStack(t, relayEnv...)
	ws.addr = fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	ws.env = append([]string{"AEP_TOKEN=" + ws.token, "AEP_HOME=" + ws.home, "KIMI_CODE_HOME=" + ws.khome}, env...)
	ws.startBridge(t)
	return ws
}

func (ws *webStack) startBridge(t *testing.T, extra ...string) {
	t.Helper()
	args := append([]string{"bridge-web", "--listen", ws.addr, "--mode", ws.mode, "--relay", ws.relayURL}, extra...)
	ws.bridge = startDaemon(t, "http://"+ws.addr, ws.env, args...)
	ws.waitHealth(t, "connected to "+ws.web.Base, func(h bridgeweb.Health) bool {
		return h.Kap.State == bridgeweb.KapConnected && h.Kap.URL == ws.web.Base
	})
}

// stoppedLogs stops the bridge and returns what it logged (the shared
// daemon helper's buffer may only be read once the process is gone).
func (ws *webStack) stoppedLogs(t *testing.T) string {
	ws.bridge.Stop(t)
	return ws.bridge.Logs.String()
}

func (ws *webStack) health(t *testing.T) bridgeweb.Health {
	t.Helper()
	resp, err := http.Get("http://" + ws.addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var h bridgeweb.Health
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		t.Fatal(err)
	}
	return h
}

func (ws *webStack) waitHealth(t *testing.T, what string, cond func(bridgeweb.Health) bool) bridgeweb.Health {
	t.Helper()
	var h bridgeweb.Health
	if !poll.Until(60*time.Second, func() bool { h = ws.health(t); return cond(h) }) {
		t.Fatalf("bridge never %s: %+v\n%s", what, h, ws.stoppedLogs(t))
	}
	return h
}

func (ws *webStack) metrics(t *testing.T) string {
	t.Helper()
	resp, err := http.Get("http://" + ws.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// session is the AEP session a kap session is published as in this mode.
func (ws *webStack) session(sid string) string {
	if ws.mode == "primary" {
		return sid
	}
	return sid + ".web"
}

func (ws *webStack) logPath(sid string) string {
	return filepath.Join(bridgeweb.LogDir(ws.home), ws.session(sid)+".jsonl")
}

// events reads the bridge's log of a kap session, which the bridge may be
// appending to: its whole lines.
func (ws *webStack) events(t *testing.T, sid string) ([]byte, []*aep.Event) {
	t.Helper()
	b, err := os.ReadFile(ws.logPath(sid))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	b = wholeLines(b)
	return b, parseLines(t, b)
}

func (ws *webStack) waitFor(t *testing.T, sid, what string, match func(*aep.Event) bool) *aep.Event {
	t.Helper()
	var found *aep.Event
	if poll.Until(60*time.Second, func() bool {
		_, evs := ws.events(t, sid)
		i := slices.IndexFunc(evs, match)
		if i >= 0 {
			found = evs[i]
		}
		return i >= 0
	}) {
		return found
	}
	_, evs := ws.events(t, sid)
	t.Fatalf("no %s in the bridge log (%v)\n%s", what, typeCounts(evs), ws.stoppedLogs(t))
	return nil
}

// waitCount waits until the log holds n events of a type.
func (ws *webStack) waitCount(t *testing.T, sid, typ string, n int) []*aep.Event {
	t.Helper()
	ws.waitFor(t, sid, fmt.Sprintf("%d %s", n, typ), func(*aep.Event) bool {
		_, evs := ws.events(t, sid)
		return typeCounts(evs)[typ] >= n
	})
	_, evs := ws.events(t, sid)
	return evs
}

// cli runs an aep-kimi command sender against the stack's relay.
func (ws *webStack) cli(t *testing.T, args ...string) (int, string) {
	t.Helper()
	return ws.stack.cli(t, args...)
}

// waitIdle waits until the kap-server has no prompt running in a session.
func (ws *webStack) waitIdle(t *testing.T, sid string) {
	t.Helper()
	if !poll.Until(60*time.Second, func() bool { return !ws.web.Busy(t, sid) }) {
		t.Fatal("the prompt never finished")
	}
}

// approveViaUI answers the next pending approval the way the web UI does.
func (ws *webStack) approveViaUI(t *testing.T, sid string) {
	t.Helper()
	var ids []string
	if !poll.Until(60*time.Second, func() bool { ids = ws.web.PendingApprovals(t, sid); return len(ids) > 0 }) {
		t.Fatal("no approval became pending")
	}
	ws.web.Decide(t, sid, ids[0], map[string]any{"decision": "approved"})
}

func kimiSeq(e *aep.Event) (int64, bool) {
	raw, ok := e.Ext[bridgeweb.ExtKimiSeq]
	if !ok {
		return 0, false
	}
	var n int64
	return n, json.Unmarshal(raw, &n) == nil
}

// sameFramesAsJournal checks the bridge mapped every durable frame of the
// kap-server's own journal exactly once: the set of kap seqs its events
// name equals the journal's (bus echoes never emit), each frame's events
// appear once, and nothing was reported lost.
func (ws *webStack) sameFramesAsJournal(t *testing.T, sid string, evs []*aep.Event) {
	t.Helper()
	want := map[int64]string{}
	for _, f := range kimiharness.Journal(t, ws.khome, sid) {
		if !strings.HasPrefix(f.Type, "permission.approval.") {
			want[f.Seq] = f.Type
		}
	}
	got := map[int64]bool{}
	seen := map[string]bool{}
	for _, e := range evs {
		if e.Type == bridgeweb.GapType {
			t.Errorf("the bridge reported a gap: %s", e.Data)
		}
		n, ok := kimiSeq(e)
		if !ok {
			continue
		}
		key := fmt.Sprint(e.Type, "@", n)
		if seen[key] {
			t.Errorf("kap frame %d mapped twice to %s", n, e.Type)
		}
		seen[key] = true
		got[n] = true
		if _, ok := want[n]; !ok {
			t.Errorf("event %s names kap seq %d, which the journal does not have", e.Type, n)
		}
	}
	var missing []string
	for n, typ := range want {
		if !got[n] {
			missing = append(missing, fmt.Sprintf("%d:%s", n, typ))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("journal frames the bridge never mapped: %v", missing)
	}
	if len(want) == 0 {
		t.Error("the journal is empty")
	}
}

// Companion mode next to a hook adapter: one session with a tool call that
// needs approval, answered in the web UI. Only x.kimi-code.web.* is emitted,
// in the session {sid}.web, each event naming its kap session.
func TestE2EBridgeWebCompanion(t *testing.T) {
	ws := startWebStack(t, "companion")
	sid := ws.web.CreateSession(t)
	ws.web.Prompt(t, sid, "run the probe")
	ws.approveViaUI(t, sid)
	ws.waitIdle(t, sid)
	ws.waitFor(t, sid, "prompt.completed", func(e *aep.Event) bool { return e.Type == "x.kimi-code.web.prompt.completed" })
	raw, evs := ws.events(t, sid)
	validateWithCLI(t, ws.logPath(sid))
	for _, e := range evs {
		if !strings.HasPrefix(e.Type, "x.kimi-code.web.") {
			t.Errorf("companion emitted %s", e.Type)
		}
		if ks, _ := e.ExtString(bridgeweb.ExtKimiSession); ks != sid || e.Session != sid+".web" {
			t.Errorf("%s in %s with kimisession %q", e.Type, e.Session, ks)
		}
		if want := bridgeweb.SourceURI(hostname(), sid); e.Source != want {
			t.Errorf("source %s, want %s", e.Source, want)
		}
	}
	counts := typeCounts(evs)
	for _, typ := range []string{"x.kimi-code.web.turn.started", "x.kimi-code.web.event.approval.requested",
		"x.kimi-code.web.event.approval.resolved", "x.kimi-code.web.tool.call.started", "x.kimi-code.web.tool.result",
		"x.kimi-code.web.turn.ended"} {
		if counts[typ] != 1 {
			t.Errorf("%d %s (%v)", counts[typ], typ, counts)
		}
	}
	// What Kimi reported of tokens: each model step's usage, and how full
	// the context was (its volatile status pulses), folded per session.
	var f consumer.Fold
	steps := 0
	for _, e := range evs {
		f.Add(e)
		if d := dataOf(e); e.Type == "x.kimi-code.web.turn.step.completed" {
			steps++
			if d[mapping.DataInputTokens] == nil || d[mapping.DataOutputTokens] == nil || d[mapping.DataContextLimit] == nil {
				t.Errorf("a model step without its usage or context: %v", d)
			}
		}
	}
	// The companion is a view of the Kimi session: the fold shows it as sid.
	if f.Session(sid+".web") != nil || len(f.Sessions()) != 1 || f.Sessions()[0] != sid {
		t.Errorf("the fold lists %v, want the Kimi session %s alone", f.Sessions(), sid)
	}
	s := f.Session(sid)
	fill, ok := s.Context.Fill()
	t.Logf("%d model steps: %d input and %d output tokens; context %d of %d tokens", steps, s.Usage.InputTokens, s.Usage.OutputTokens, s.Context.Tokens, s.Context.Limit)
	if steps == 0 || !s.Usage.Known || s.Usage.InputTokens == 0 || s.Usage.OutputTokens == 0 || !ok || fill <= 0 || fill >= 1 {
		t.Errorf("the fold's tokens: usage %+v, context %+v", s.Usage, s.Context)
	}
	ws.sameFramesAsJournal(t, sid, evs)
	ws.sameOnRelay(t, raw, ws.session(sid))

	// tail names the session by one short id (never the whole, never two
	// ids for it), and says tokens in words, not as raw fields.
	code, out := ws.cli(t, "tail", "--from", "all", "--once", "--state", "none")
	short := consumer.BareID(sid)[:6]
	if code != 0 || !strings.Contains(out, short) {
		t.Fatalf("tail (exit %d) does not show %s:\n%s", code, short, out)
	}
	for _, bad := range []string{consumer.BareID(sid)[:12], "gen ai.", "x-kimi-code-", "heartbeat"} {
		if strings.Contains(out, bad) {
			t.Errorf("tail prints %q:\n%s", bad, out)
		}
	}
}

func hostname() string { h, _ := os.Hostname(); return h }

// sameOwnOnRelay asserts the relay holds exactly the bridge's log for a
// session, byte for byte and in order, next to the commands senders put in
// the same session history.
func (ws *webStack) sameOwnOnRelay(t *testing.T, logBytes []byte, sid string) {
	t.Helper()
	want := bytes.Split(bytes.TrimSpace(logBytes), []byte("\n"))
	source := bridgeweb.SourceURI(hostname(), sid)
	var own [][]byte
	poll.Until(10*time.Second, func() bool {
		own = own[:0]
		for _, line := range ws.relayEvents(t, ws.session(sid)) {
			if e, err := aep.ParseEvent(line); err == nil && e.Source == source {
				own = append(own, line)
			}
		}
		return len(own) >= len(want)
	})
	if len(own) != len(want) {
		t.Fatalf("relay holds %d of the bridge's events, the log %d", len(own), len(want))
	}
	for i := range want {
		if !bytes.Equal(want[i], own[i]) {
			t.Fatalf("event %d differs between log and relay:\nlog:   %s\nrelay: %s", i, want[i], own[i])
		}
	}
}

var commandID = regexp.MustCompile(`\(command ([0-9A-Z]+)\)`)

// Primary mode with control: approve and reject from `aep-kimi respond`,
// abort a running turn from `aep-kimi cancel`, each observed on the stream
// through the real relay; the stream is valid AEP with runs, tools and the
// attention loop.
func TestE2EBridgeWebPrimaryControl(t *testing.T) {
	ws := startWebStack(t, "primary", "AEP_KIMI_WEB_CONTROL=1")
	if h := ws.health(t); strings.Join(h.Control, ",") != "control.attention.respond,control.cancel,"+mapping.TypeRate {
		t.Fatalf("control %v", h.Control)
	}
	sid := ws.web.CreateSession(t)
	requestN := func(n int) *aep.Event {
		evs := ws.waitCount(t, sid, "attention.requested", n)
		var reqs []*aep.Event
		for _, e := range evs {
			if e.Type == "attention.requested" {
				reqs = append(reqs, e)
			}
		}
		return reqs[n-1]
	}

	// 1. Approve.
	ws.web.Prompt(t, sid, "run the probe")
	req := requestN(1)
	d := dataOf(req)
	if fmt.Sprint(d["respond_via"]) != "[control]" || len(d["options"].([]any)) != 3 {
		t.Errorf("request %v", d)
	}
	code, out := ws.cli(t, "respond", "--option", "approved", sid, req.ID)
	if code != 0 {
		t.Fatalf("respond: %d %s", code, out)
	}
	approveCmd := commandID.FindStringSubmatch(out)[1]
	ws.waitCount(t, sid, "run.finished", 1)

	// 2. Reject with free text: it never approves, it rejects with the
	// text as Kimi's feedback.
	ws.web.Prompt(t, sid, "reject me")
	req2 := requestN(2)
	code, out = ws.cli(t, "respond", "--text", "not on this machine", sid, req2.ID)
	if code != 0 {
		t.Fatalf("respond: %d %s", code, out)
	}
	rejectCmd := commandID.FindStringSubmatch(out)[1]
	ws.waitCount(t, sid, "run.finished", 2)

	// 3. Abort a running turn.
	ws.web.Prompt(t, sid, "slow prompt")
	ws.waitCount(t, sid, "run.started", 3)
	code, out = ws.cli(t, "cancel", "--scope", "session", sid)
	if code != exitRejected || !strings.Contains(out, "refused") {
		t.Errorf("cancel scope session: %d %s", code, out)
	}
	code, out = ws.cli(t, "cancel", sid)
	if code != 0 {
		t.Fatalf("cancel: %d %s", code, out)
	}
	cancelCmd := commandID.FindStringSubmatch(out)[1]
	ws.waitCount(t, sid, "run.cancelled", 1)
	ws.waitIdle(t, sid)
	ws.waitFor(t, sid, "the last prompt's end", func(e *aep.Event) bool { return e.Type == "x.kimi-code.web.prompt.aborted" })

	raw, evs := ws.events(t, sid)
	validateWithCLI(t, ws.logPath(sid))
	want(t, evs, map[string]int{"run.started": 3, "run.finished": 2, "run.cancelled": 1, "tool.requested": 2,
		"tool.completed": 1, "tool.failed": 1, "attention.requested": 2, "attention.answered": 2, "attention.resolved": 2,
		"control.accepted": 3, "control.rejected": 1})
	byID := map[string]*aep.Event{}
	for _, e := range evs {
		byID[e.ID] = e
	}
	answers := map[string]*aep.Event{}
	for _, e := range evs {
		switch e.Type {
		case "control.accepted", "control.rejected":
			if e.Cause != approveCmd && e.Cause != rejectCmd && e.Cause != cancelCmd && e.Type == "control.accepted" {
				t.Errorf("ack caused by %s", e.Cause)
			}
		case "attention.answered":
			answers[e.Cause] = e
			if byID[e.Subject] == nil || byID[e.Subject].Type != "attention.requested" {
				t.Errorf("answered subject %s is not a request id", e.Subject)
			}
			if dataOf(e)["via"] != "control" {
				t.Errorf("answer via %v", dataOf(e)["via"])
			}
		case "attention.resolved":
			if e.Cause != approveCmd && e.Cause != rejectCmd {
				t.Errorf("resolved caused by %s, not the command", e.Cause)
			}
		case "run.cancelled":
			if e.Cause != cancelCmd || dataOf(e)["by"] != "control" {
				t.Errorf("run.cancelled cause %s by %v", e.Cause, dataOf(e)["by"])
			}
		case "tool.failed":
			tool, _ := dataOf(e)["tool"].(map[string]any)
			if tool["name"] != "Bash" || byID[e.Cause] == nil || byID[e.Cause].Type != "tool.requested" {
				t.Errorf("tool.failed %v not paired", tool)
			}
		}
		if strings.HasPrefix(e.Type, "tool.") || strings.HasPrefix(e.Type, "attention.") {
			if e.Run == "" {
				t.Errorf("%s outside a run", e.Type)
			}
		}
	}
	if a := answers[approveCmd]; a == nil || fmt.Sprint(dataOf(a)["answer"]) != "map[option:approved]" {
		t.Errorf("approval answer %v", a)
	}
	if a := answers[rejectCmd]; a == nil || fmt.Sprint(dataOf(a)["answer"]) != "map[option:rejected text:not on this machine]" {
		t.Errorf("rejection answer %v", a)
	}
	ws.sameFramesAsJournal(t, sid, evs)
	ws.sameOwnOnRelay(t, raw, sid)
}

// The kap-server restarts mid-session (a shutdown, then a new server on
// another port), and later the bridge itself is killed and restarted while
// the session goes on: nothing is lost or repeated, compared with the
// server's own journal.
func TestE2EBridgeWebRestarts(t *testing.T) {
	ws := startWebStack(t, "primary")
	sid := ws.web.CreateSession(t)
	ws.web.Prompt(t, sid, "run the probe")
	ws.approveViaUI(t, sid)
	ws.waitIdle(t, sid)
	ws.waitCount(t, sid, "run.finished", 1)

	// The server is told to stop. It only exits once WebSocket clients
	// leave: the bridge must notice and let go.
	old := ws.web
	start := time.Now()
	old.Shutdown(t)
	select {
	case <-old.Exited():
	case <-time.After(15 * time.Second):
		t.Fatal("kimi web still runs 15 s after shutdown: the bridge kept it alive")
	}
	t.Logf("kimi web exited %s after shutdown", time.Since(start).Round(100*time.Millisecond))
	ws.waitHealth(t, "noticed the server is gone", func(h bridgeweb.Health) bool { return h.Kap.State != bridgeweb.KapConnected })

	// A new server on another port; the bridge finds it in the registry.
	ws.web = kimiharness.StartWeb(t, ws.kimi, ws.khome, ws.work)
	ws.waitHealth(t, "followed the restart", func(h bridgeweb.Health) bool {
		return h.Kap.State == bridgeweb.KapConnected && h.Kap.URL == ws.web.Base
	})
	// The restarted server has not loaded the session; opening it (as the
	// web UI does) loads it, and the bridge subscribes it from its cursor.
	ws.web.PendingApprovals(t, sid)
	ws.waitHealth(t, "re-subscribed the session", func(h bridgeweb.Health) bool { return h.SessionsFollowed >= 1 })
	ws.web.Prompt(t, sid, "run the probe")
	ws.approveViaUI(t, sid)
	ws.waitIdle(t, sid)
	ws.waitCount(t, sid, "run.finished", 2)

	// The bridge is killed; the session goes on without it; the restarted
	// bridge resumes from the position its log recorded.
	ws.bridge.Kill()
	ws.web.Prompt(t, sid, "hello while the bridge is down")
	ws.waitIdle(t, sid)
	ws.startBridge(t)
	ws.waitCount(t, sid, "run.finished", 3)
	ws.waitFor(t, sid, "the last prompt's completion", func(e *aep.Event) bool {
		n, _ := kimiSeq(e)
		j := kimiharness.Journal(t, ws.khome, sid)
		return e.Type == "x.kimi-code.web.prompt.completed" && n == j[len(j)-1].Seq
	})
	raw, evs := ws.events(t, sid)
	validateWithCLI(t, ws.logPath(sid))
	want(t, evs, map[string]int{"run.started": 3, "run.finished": 3, "tool.requested": 2, "tool.completed": 2,
		"attention.requested": 2, "attention.answered": 2, "attention.resolved": 2})
	epochs := map[int64]bool{}
	for _, e := range evs {
		epochs[e.EpochOrZero()] = true
	}
	if len(epochs) != 2 {
		t.Errorf("%d epochs, want 2 (one per bridge run)", len(epochs))
	}
	ws.sameFramesAsJournal(t, sid, evs)
	ws.sameOnRelay(t, raw, sid)
}

// A wrong kap token: a clear log line and a metric, the bridge keeps
// running and retrying, and connects once the token file is right. Neither
// token ever reaches its log.
func TestE2EBridgeWebWrongToken(t *testing.T) {
	kimi := kimiharness.Require(t)
	mock := kimiharness.StartMock(t, kimiharness.WriteScript(t, webScript))
	khome, home := t.TempDir(), t.TempDir()
	kimiharness.WriteWebConfig(t, khome, mock.Port)
	web := kimiharness.StartWeb(t, kimi, khome, t.TempDir())
	tokenFile := filepath.Join(t.TempDir(), "kap.token")
	os.WriteFile(tokenFile, []byte("not-the-token\n"), 0o600)
	addr := fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	ws := &webStack{addr: addr}
	ws.bridge = startDaemon(t, "http://"+addr, []string{"AEP_HOME=" + home}, "bridge-web", "--listen", addr,
		"--kimi-home", khome, "--kap-token-file", tokenFile, "--relay", "none")
	ws.waitHealth(t, "reported the refused token", func(h bridgeweb.Health) bool { return h.Kap.State == bridgeweb.KapUnauthorized })
	if m := ws.metrics(t); !strings.Contains(m, `aepkimi_bridgeweb_kap_connect_errors_total{reason="unauthorized"}`) {
		t.Error("no unauthorized metric")
	}
	os.WriteFile(tokenFile, []byte(web.Token+"\n"), 0o600)
	ws.waitHealth(t, "connected with the corrected token", func(h bridgeweb.Health) bool { return h.Kap.State == bridgeweb.KapConnected })
	logs := ws.stoppedLogs(t)
	if !strings.Contains(logs, "refused the bearer token (HTTP 401)") {
		t.Errorf("no clear log line:\n%s", logs)
	}
	if strings.Contains(logs, web.Token) || strings.Contains(logs, "not-the-token") {
		t.Error("a token reached the log")
	}
}
