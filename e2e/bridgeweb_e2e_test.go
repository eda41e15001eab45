// bridge-web against the real `kimi web`: companion and primary modes,
// server restarts and a wrong token.

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/bridgeweb"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// Companion mode next to a hook adapter: one session with a tool call that
// needs approval, answered in the web UI. Only x.kimi-code.web.* is emitted,
// in the session {sid}.web, each event naming its kap session. The same
// kimi web then refuses a second bridge's wrong token (one Kimi start
// serves both: its CPU is most of the suite's).
func TestE2EBridgeWebCompanion(t *testing.T) {
	t.Parallel()
	ws := stacktest.StartWebStack(t, "companion")
	sid := ws.Web.CreateSession(t)
	ws.Web.Prompt(t, sid, "run the probe")
	ws.ApproveViaUI(t, sid)
	ws.WaitIdle(t, sid)
	ws.WaitFor(t, sid, "prompt.completed", func(e *aep.Event) bool { return e.Type == "x.kimi-code.web.prompt.completed" })
	raw, evs := ws.Events(t, sid)
	stacktest.ValidateWithCLI(t, ws.LogPath(sid))
	for _, e := range evs {
		if !strings.HasPrefix(e.Type, "x.kimi-code.web.") {
			t.Errorf("companion emitted %s", e.Type)
		}
		if ks, _ := e.ExtString(bridgeweb.ExtKimiSession); ks != sid || e.Session != sid+".web" {
			t.Errorf("%s in %s with kimisession %q", e.Type, e.Session, ks)
		}
		if want := bridgeweb.SourceURI(stacktest.Hostname(), sid); e.Source != want {
			t.Errorf("source %s, want %s", e.Source, want)
		}
	}
	counts := stacktest.TypeCounts(evs)
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
		if d := stacktest.DataOf(e); e.Type == "x.kimi-code.web.turn.step.completed" {
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
	ws.SameFramesAsJournal(t, sid, evs)
	ws.SameOnRelay(t, raw, ws.Session(sid))

	// tail names the session by one short id (never the whole, never two
	// ids for it), and says tokens in words, not as raw fields.
	code, out := ws.Cli(t, "tail", "--from", "all", "--once", "--state", "none")
	short := consumer.BareID(sid)[:6]
	if code != 0 || !strings.Contains(out, short) {
		t.Fatalf("tail (exit %d) does not show %s:\n%s", code, short, out)
	}
	for _, bad := range []string{consumer.BareID(sid)[:12], "gen ai.", "x-kimi-code-", "heartbeat"} {
		if strings.Contains(out, bad) {
			t.Errorf("tail prints %q:\n%s", bad, out)
		}
	}

	// The same kimi web, for a second bridge that has the wrong token:
	// Kimi is only the server that refuses it.
	t.Run("wrong token", func(t *testing.T) { wrongToken(t, ws.Web) })
}

// Primary mode with control: approve and reject from `aep-kimi respond`,
// abort a running turn from `aep-kimi cancel`, each observed on the stream
// through the real relay; the stream is valid AEP with runs, tools and the
// attention loop.
func TestE2EBridgeWebPrimaryControl(t *testing.T) {
	t.Parallel()
	ws := stacktest.StartWebStack(t, "primary", "AEP_KIMI_WEB_CONTROL=1")
	if h := ws.Health(t); strings.Join(h.Control, ",") != "control.attention.respond,control.cancel,"+mapping.TypeRate {
		t.Fatalf("control %v", h.Control)
	}
	sid := ws.Web.CreateSession(t)
	requestN := func(n int) *aep.Event {
		evs := ws.WaitCount(t, sid, "attention.requested", n)
		var reqs []*aep.Event
		for _, e := range evs {
			if e.Type == "attention.requested" {
				reqs = append(reqs, e)
			}
		}
		return reqs[n-1]
	}

	// 1. Approve.
	ws.Web.Prompt(t, sid, "run the probe")
	req := requestN(1)
	d := stacktest.DataOf(req)
	if fmt.Sprint(d["respond_via"]) != "[control]" || len(d["options"].([]any)) != 3 {
		t.Errorf("request %v", d)
	}
	code, out := ws.Cli(t, "respond", "--option", "approved", sid, req.ID)
	if code != 0 {
		t.Fatalf("respond: %d %s", code, out)
	}
	approveCmd := stacktest.CommandID.FindStringSubmatch(out)[1]
	ws.WaitCount(t, sid, "run.finished", 1)

	// 2. Reject with free text: it never approves, it rejects with the
	// text as Kimi's feedback.
	ws.Web.Prompt(t, sid, "reject me")
	req2 := requestN(2)
	code, out = ws.Cli(t, "respond", "--text", "not on this machine", sid, req2.ID)
	if code != 0 {
		t.Fatalf("respond: %d %s", code, out)
	}
	rejectCmd := stacktest.CommandID.FindStringSubmatch(out)[1]
	ws.WaitCount(t, sid, "run.finished", 2)

	// 3. Abort a running turn.
	ws.Web.Prompt(t, sid, "slow prompt")
	ws.WaitCount(t, sid, "run.started", 3)
	code, out = ws.Cli(t, "cancel", "--scope", "session", sid)
	if code != stacktest.ExitRejected || !strings.Contains(out, "refused") {
		t.Errorf("cancel scope session: %d %s", code, out)
	}
	code, out = ws.Cli(t, "cancel", sid)
	if code != 0 {
		t.Fatalf("cancel: %d %s", code, out)
	}
	cancelCmd := stacktest.CommandID.FindStringSubmatch(out)[1]
	ws.WaitCount(t, sid, "run.cancelled", 1)
	ws.WaitIdle(t, sid)
	ws.WaitFor(t, sid, "the last prompt's end", func(e *aep.Event) bool { return e.Type == "x.kimi-code.web.prompt.aborted" })

	raw, evs := ws.Events(t, sid)
	stacktest.ValidateWithCLI(t, ws.LogPath(sid))
	stacktest.Want(t, evs, map[string]int{"run.started": 3, "run.finished": 2, "run.cancelled": 1, "tool.requested": 2,
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
			if stacktest.DataOf(e)["via"] != "control" {
				t.Errorf("answer via %v", stacktest.DataOf(e)["via"])
			}
		case "attention.resolved":
			if e.Cause != approveCmd && e.Cause != rejectCmd {
				t.Errorf("resolved caused by %s, not the command", e.Cause)
			}
		case "run.cancelled":
			if e.Cause != cancelCmd || stacktest.DataOf(e)["by"] != "control" {
				t.Errorf("run.cancelled cause %s by %v", e.Cause, stacktest.DataOf(e)["by"])
			}
		case "tool.failed":
			tool, _ := stacktest.DataOf(e)["tool"].(map[string]any)
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
	if a := answers[approveCmd]; a == nil || fmt.Sprint(stacktest.DataOf(a)["answer"]) != "map[option:approved]" {
		t.Errorf("approval answer %v", a)
	}
	if a := answers[rejectCmd]; a == nil || fmt.Sprint(stacktest.DataOf(a)["answer"]) != "map[option:rejected text:not on this machine]" {
		t.Errorf("rejection answer %v", a)
	}
	ws.SameFramesAsJournal(t, sid, evs)
	ws.SameOwnOnRelay(t, raw, sid)
}

// The kap-server restarts mid-session (a shutdown, then a new server on
// another port), and later the bridge itself is killed and restarted while
// the session goes on: nothing is lost or repeated, compared with the
// server's own journal.
func TestE2EBridgeWebRestarts(t *testing.T) {
	t.Parallel()
	ws := stacktest.StartWebStack(t, "primary")
	sid := ws.Web.CreateSession(t)
	ws.Web.Prompt(t, sid, "run the probe")
	ws.ApproveViaUI(t, sid)
	ws.WaitIdle(t, sid)
	ws.WaitCount(t, sid, "run.finished", 1)

	// The server is told to stop. It only exits once WebSocket clients
	// leave: the bridge must notice and let go.
	old := ws.Web
	start := time.Now()
	old.Shutdown(t)
	select {
	case <-old.Exited():
	case <-time.After(15 * time.Second):
		t.Fatal("kimi web still runs 15 s after shutdown: the bridge kept it alive")
	}
	t.Logf("kimi web exited %s after shutdown", time.Since(start).Round(100*time.Millisecond))
	ws.WaitHealth(t, "noticed the server is gone", func(h bridgeweb.Health) bool { return h.Kap.State != bridgeweb.KapConnected })

	// A new server on another port; the bridge finds it in the registry.
	ws.Web = kimiharness.StartWeb(t, ws.Kimi, ws.Khome, ws.Work)
	ws.WaitHealth(t, "followed the restart", func(h bridgeweb.Health) bool {
		return h.Kap.State == bridgeweb.KapConnected && h.Kap.URL == ws.Web.Base
	})
	// The restarted server has not loaded the session; opening it (as the
	// web UI does) loads it, and the bridge subscribes it from its cursor.
	ws.Web.PendingApprovals(t, sid)
	ws.WaitHealth(t, "re-subscribed the session", func(h bridgeweb.Health) bool { return h.SessionsFollowed >= 1 })
	ws.Web.Prompt(t, sid, "run the probe")
	ws.ApproveViaUI(t, sid)
	ws.WaitIdle(t, sid)
	ws.WaitCount(t, sid, "run.finished", 2)

	// The bridge is killed; the session goes on without it; the restarted
	// bridge resumes from the position its log recorded.
	ws.Bridge.Kill()
	ws.Web.Prompt(t, sid, "hello while the bridge is down")
	ws.WaitIdle(t, sid)
	ws.StartBridge(t)
	ws.WaitCount(t, sid, "run.finished", 3)
	ws.WaitFor(t, sid, "the last prompt's completion", func(e *aep.Event) bool {
		n, _ := stacktest.KimiSeq(e)
		j := kimiharness.Journal(t, ws.Khome, sid)
		return e.Type == "x.kimi-code.web.prompt.completed" && n == j[len(j)-1].Seq
	})
	raw, evs := ws.Events(t, sid)
	stacktest.ValidateWithCLI(t, ws.LogPath(sid))
	stacktest.Want(t, evs, map[string]int{"run.started": 3, "run.finished": 3, "tool.requested": 2, "tool.completed": 2,
		"attention.requested": 2, "attention.answered": 2, "attention.resolved": 2})
	epochs := map[int64]bool{}
	for _, e := range evs {
		epochs[e.EpochOrZero()] = true
	}
	if len(epochs) != 2 {
		t.Errorf("%d epochs, want 2 (one per bridge run)", len(epochs))
	}
	ws.SameFramesAsJournal(t, sid, evs)
	ws.SameOnRelay(t, raw, sid)
}

// A wrong kap token: a clear log line and a metric, the bridge keeps
// running and retrying, and connects once the token file is right. Neither
// token ever reaches its log. web is a running kimi web, whichever bridges
// it serves already.
func wrongToken(t *testing.T, web *kimiharness.Web) {
	home := t.TempDir()
	tokenFile := filepath.Join(t.TempDir(), "kap.token")
	os.WriteFile(tokenFile, []byte("not-the-token\n"), 0o600)
	addr := fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	ws := &stacktest.WebStack{Addr: addr}
	ws.Bridge = stacktest.StartDaemon(t, "http://"+addr, []string{"AEP_HOME=" + home}, "bridge-web", "--listen", addr,
		"--kimi-home", web.Home, "--kap-token-file", tokenFile, "--relay", "none")
	ws.WaitHealth(t, "reported the refused token", func(h bridgeweb.Health) bool { return h.Kap.State == bridgeweb.KapUnauthorized })
	if m := ws.Metrics(t); !strings.Contains(m, `aepkimi_bridgeweb_kap_connect_errors_total{reason="unauthorized"}`) {
		t.Error("no unauthorized metric")
	}
	os.WriteFile(tokenFile, []byte(web.Token+"\n"), 0o600)
	ws.WaitHealth(t, "connected with the corrected token", func(h bridgeweb.Health) bool { return h.Kap.State == bridgeweb.KapConnected })
	logs := ws.StoppedLogs(t)
	if !strings.Contains(logs, "refused the bearer token (HTTP 401)") {
		t.Errorf("no clear log line:\n%s", logs)
	}
	if strings.Contains(logs, web.Token) || strings.Contains(logs, "not-the-token") {
		t.Error("a token reached the log")
	}
}
