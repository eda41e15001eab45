package stacktest

import (
	"bytes"
	"encoding/json"
	"fmt"
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
	"github.com/aep-kimi/aep-kimi/internal/testkit/httpcall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
)

// WebScript is the mock model for these tests: a tool call needing approval
// on "run the probe" / "reject me", a reply after the tool result, and a slow
// answer to abort.
var WebScript = map[string]any{
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

// WebStack is a kimi web server, a relay, and a bridge publishing to it.
type WebStack struct {
	*Stack // relayURL and token, for the shared relay helpers
	Kimi   string
	Mode   string
	Home   string // AEP home
	Khome  string // KIMI_CODE_HOME
	Work   string
	Web    *kimiharness.Web
	Mock   *kimiharness.Mock
	Bridge *proctest.Proc
	Addr   string
	Env    []string
}

func StartWebStack(t *testing.T, mode string, env ...string) *WebStack {
	t.Helper()
	return StartWebStackOn(t, nil, mode, env...)
}

// StartWebStackOn is startWebStack with relayEnv added to the relay's
// environment (AEP_STORE, AEP_BUFFER...).
func StartWebStackOn(t *testing.T, relayEnv []string, mode string, env ...string) *WebStack {
	t.Helper()
	kimi := kimiharness.Require(t)
	return StartWebStackWith(t, kimi, kimiharness.WriteScript(t, WebScript), relayEnv, mode, env...)
}

// StartWebStackWith is startWebStackOn with the mock serving the script
// at path.
func StartWebStackWith(t *testing.T, kimi, script string, relayEnv []string, mode string, env ...string) *WebStack {
	t.Helper()
	mock := kimiharness.StartMock(t, script)
	ws := &WebStack{Kimi: kimi, Mode: mode, Home: t.TempDir(), Khome: t.TempDir(), Work: t.TempDir(), Mock: mock}
	kimiharness.WriteWebConfig(t, ws.Khome, mock.Port)
	ws.Web = kimiharness.StartWeb(t, kimi, ws.Khome, ws.Work)
	ws.Stack = NewStack(t, relayEnv...)
	ws.Addr = fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	ws.Env = append([]string{"AEP_TOKEN=" + ws.Token, "AEP_HOME=" + ws.Home, "KIMI_CODE_HOME=" + ws.Khome}, env...)
	ws.StartBridge(t)
	return ws
}

func (ws *WebStack) StartBridge(t *testing.T, extra ...string) {
	t.Helper()
	args := append([]string{"bridge-web", "--listen", ws.Addr, "--mode", ws.Mode, "--relay", ws.RelayURL}, extra...)
	ws.Bridge = StartDaemon(t, "http://"+ws.Addr, ws.Env, args...)
	ws.WaitHealth(t, "connected to "+ws.Web.Base, func(h bridgeweb.Health) bool {
		return h.Kap.State == bridgeweb.KapConnected && h.Kap.URL == ws.Web.Base
	})
}

// StoppedLogs stops the bridge and returns what it logged (the shared
// daemon helper's buffer may only be read once the process is gone).
func (ws *WebStack) StoppedLogs(t *testing.T) string {
	ws.Bridge.Stop(t)
	return ws.Bridge.Logs.String()
}

func (ws *WebStack) Health(t *testing.T) bridgeweb.Health {
	t.Helper()
	var h bridgeweb.Health
	httpcall.Get(t, "http://"+ws.Addr+"/healthz", "").JSON(t, &h)
	return h
}

func (ws *WebStack) WaitHealth(t *testing.T, what string, cond func(bridgeweb.Health) bool) bridgeweb.Health {
	t.Helper()
	var h bridgeweb.Health
	if !poll.Until(kimiharness.Patience, func() bool { h = ws.Health(t); return cond(h) }) {
		t.Fatalf("bridge never %s: %+v\n%s", what, h, ws.StoppedLogs(t))
	}
	return h
}

func (ws *WebStack) Metrics(t *testing.T) string {
	t.Helper()
	return string(httpcall.Get(t, "http://"+ws.Addr+"/metrics", "").Body)
}

// Session is the AEP session a kap session is published as in this mode.
func (ws *WebStack) Session(sid string) string {
	if ws.Mode == "primary" {
		return sid
	}
	return sid + ".web"
}

func (ws *WebStack) LogPath(sid string) string {
	return filepath.Join(bridgeweb.LogDir(ws.Home), ws.Session(sid)+".jsonl")
}

// Events reads the bridge's log of a kap session, which the bridge may be
// appending to: its whole lines.
func (ws *WebStack) Events(t *testing.T, sid string) ([]byte, []*aep.Event) {
	t.Helper()
	b, err := os.ReadFile(ws.LogPath(sid))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	b = WholeLines(b)
	return b, ParseLines(t, b)
}

func (ws *WebStack) WaitFor(t *testing.T, sid, what string, match func(*aep.Event) bool) *aep.Event {
	t.Helper()
	var found *aep.Event
	if poll.Until(kimiharness.Patience, func() bool {
		_, evs := ws.Events(t, sid)
		i := slices.IndexFunc(evs, match)
		if i >= 0 {
			found = evs[i]
		}
		return i >= 0
	}) {
		return found
	}
	_, evs := ws.Events(t, sid)
	t.Fatalf("no %s in the bridge log (%v)\n%s", what, TypeCounts(evs), ws.StoppedLogs(t))
	return nil
}

// WaitCount waits until the log holds n events of a type.
func (ws *WebStack) WaitCount(t *testing.T, sid, typ string, n int) []*aep.Event {
	t.Helper()
	ws.WaitFor(t, sid, fmt.Sprintf("%d %s", n, typ), func(*aep.Event) bool {
		_, evs := ws.Events(t, sid)
		return TypeCounts(evs)[typ] >= n
	})
	_, evs := ws.Events(t, sid)
	return evs
}

// Cli runs an aep-kimi command sender against the stack's relay.
func (ws *WebStack) Cli(t *testing.T, args ...string) (int, string) {
	t.Helper()
	return ws.Stack.Cli(t, args...)
}

// WaitIdle waits until the kap-server has no prompt running in a session.
func (ws *WebStack) WaitIdle(t *testing.T, sid string) {
	t.Helper()
	if !poll.Until(kimiharness.Patience, func() bool { return !ws.Web.Busy(t, sid) }) {
		t.Fatal("the prompt never finished")
	}
}

// ApproveViaUI answers the next pending approval the way the web UI does.
func (ws *WebStack) ApproveViaUI(t *testing.T, sid string) {
	t.Helper()
	var ids []string
	if !poll.Until(kimiharness.Patience, func() bool { ids = ws.Web.PendingApprovals(t, sid); return len(ids) > 0 }) {
		t.Fatal("no approval became pending")
	}
	ws.Web.Decide(t, sid, ids[0], map[string]any{"decision": "approved"})
}

func KimiSeq(e *aep.Event) (int64, bool) {
	raw, ok := e.Ext[bridgeweb.ExtKimiSeq]
	if !ok {
		return 0, false
	}
	var n int64
	return n, json.Unmarshal(raw, &n) == nil
}

// SameFramesAsJournal checks the bridge mapped every durable frame of the
// kap-server's own journal exactly once: the set of kap seqs its events
// name equals the journal's (bus echoes never emit), each frame's events
// appear once, and nothing was reported lost.
func (ws *WebStack) SameFramesAsJournal(t *testing.T, sid string, evs []*aep.Event) {
	t.Helper()
	want := map[int64]string{}
	for _, f := range kimiharness.Journal(t, ws.Khome, sid) {
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
		n, ok := KimiSeq(e)
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

func Hostname() string { h, _ := os.Hostname(); return h }

// SameOwnOnRelay asserts the relay holds exactly the bridge's log for a
// Session, byte for byte and in order, next to the commands senders put in
// the same session history.
func (ws *WebStack) SameOwnOnRelay(t *testing.T, logBytes []byte, sid string) {
	t.Helper()
	want := bytes.Split(bytes.TrimSpace(logBytes), []byte("\n"))
	source := bridgeweb.SourceURI(Hostname(), sid)
	var own [][]byte
	poll.Until(10*time.Second, func() bool {
		own = own[:0]
		for _, line := range ws.RelayEvents(t, ws.Session(sid)) {
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

var CommandID = regexp.MustCompile(`\(command ([0-9A-Z]+)\)`)
