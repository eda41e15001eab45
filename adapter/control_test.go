package adapter

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/emittertest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

func controlServer(t *testing.T, c Control) (*Server, *emittertest.Recorder, string) {
	t.Helper()
	home := t.TempDir()
	pub := &emittertest.Recorder{}
	c.Authenticated = true
	s := newTestServer(t, home, func(cfg *Config) { cfg.Publisher = pub; cfg.Control = c })
	return s, pub, home
}

const (
	gateSession = "gate-s"
	preTool     = `{"hook_event_name":"PreToolUse","session_id":"gate-s","tool_name":"Bash","tool_input":{"command":"rm -rf build"},"tool_call_id":"call_g1"}`
)

// hold sends a PreToolUse and returns its pending reply and the gate's
// attention request.
func holdTool(t *testing.T, s *Server, pub *emittertest.Recorder) (<-chan outcome, *aep.Event) {
	t.Helper()
	s.ingest(&delivery{payload: []byte(`{"hook_event_name":"UserPromptSubmit","session_id":"gate-s","prompt":[{"type":"text","text":"go"}],"is_steer":false}`), at: time.Now()}, false)
	out, _, err := s.ingest(&delivery{payload: []byte(preTool), at: time.Now()}, false)
	if err != nil {
		t.Fatal(err)
	}
	if out.wait == nil {
		t.Fatal("PreToolUse was not held")
	}
	reqs := pub.Find("attention.requested")
	if len(reqs) != 1 {
		t.Fatalf("%d attention requests", len(reqs))
	}
	return out.wait, reqs[0]
}

func reply(t *testing.T, ch <-chan outcome) map[string]any {
	t.Helper()
	select {
	case o := <-ch:
		b := o.reply
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("reply %q: %v", b, err)
		}
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("held hook never released")
		return nil
	}
}

func TestGateRequestShape(t *testing.T) {
	t.Parallel()
	s, pub, _ := controlServer(t, Control{Gate: true})
	_, req := holdTool(t, s, pub)
	d, _ := req.DataMap()
	if d["kind"] != "permission" || req.Severity != "notice" || req.Subject != "Bash" {
		t.Fatalf("request %v", d)
	}
	if via, _ := d["respond_via"].([]any); len(via) != 1 || via[0] != "control" {
		t.Fatalf("respond_via %v", d["respond_via"])
	}
	opts, _ := d["options"].([]any)
	var ids []string
	for _, o := range opts {
		ids = append(ids, o.(map[string]any)["id"].(string))
	}
	if strings.Join(ids, ",") != "allow,allow_session,deny,cancel" {
		t.Fatalf("options %v", ids)
	}
	if p, _ := d["prompt"].(string); !strings.Contains(p, "rm -rf build") {
		t.Fatalf("prompt at redacted should name the input: %q", p)
	}
	if _, ok := d["expires_at"]; !ok {
		t.Fatal("no expires_at")
	}
	if req.Cause != pub.Find("tool.requested")[0].ID {
		t.Fatal("gate request not caused by its tool.requested")
	}
}

func TestGateDenyBlocksWithReason(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		answer map[string]any
		reason string
		option string
	}{
		{"deny option with text", map[string]any{"option": "deny", "text": "not on prod"}, "not on prod", "deny"},
		{"cancel option", map[string]any{"option": "cancel"}, "Cancelled by dashboard", "cancel"},
		{"text naming deny", map[string]any{"text": " DENY "}, "Denied by dashboard", "deny"},
		{"free text never allows", map[string]any{"text": "use the staging registry instead"}, "use the staging registry instead", "deny"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, pub, _ := controlServer(t, Control{Gate: true})
			ch, req := holdTool(t, s, pub)
			cmd := emittertest.Command(t, CmdRespond, gateSession, req.ID, map[string]any{"answer": c.answer})
			s.HandleCommand(context.Background(), cmd)
			r := reply(t, ch)
			hso, _ := r["hookSpecificOutput"].(map[string]any)
			if hso["permissionDecision"] != "deny" || !strings.Contains(hso["permissionDecisionReason"].(string), c.reason) {
				t.Fatalf("reply %v", r)
			}
			acks := pub.Find("control.accepted")
			if len(acks) != 1 || acks[0].Cause != cmd.ID {
				t.Fatalf("acks %v", acks)
			}
			ans := pub.Find("attention.answered")
			ad, _ := ans[0].DataMap()
			if ad["answer"].(map[string]any)["option"] != c.option || ad["via"] != "control" || ans[0].Subject != req.ID || ans[0].Cause != cmd.ID {
				t.Fatalf("answered %v", ad)
			}
			res := pub.Find("attention.resolved")
			if len(res) != 1 || res[0].Subject != req.ID {
				t.Fatalf("resolved %v", res)
			}
			den := pub.Find("tool.denied")
			dd, _ := den[0].DataMap()
			if len(den) != 1 || dd["by"] != "policy" || den[0].Cause != ans[0].ID {
				t.Fatalf("denied %v", dd)
			}
			assertValidStream(t, pub.All())
		})
	}
}

func TestGateAllowIsNoObjection(t *testing.T) {
	t.Parallel()
	for _, answer := range []map[string]any{{"option": "allow"}, {"option": "allow_session"}, {"text": "Allow for this session"}} {
		s, pub, _ := controlServer(t, Control{Gate: true})
		ch, req := holdTool(t, s, pub)
		s.HandleCommand(context.Background(), emittertest.Command(t, CmdRespond, gateSession, req.ID, map[string]any{"answer": answer}))
		if r := reply(t, ch); len(r) != 0 {
			t.Fatalf("%v: allow replied %v, want no objection", answer, r)
		}
		if len(pub.Find("tool.denied")) != 0 {
			t.Fatal("allow denied the tool")
		}
	}
}

func TestGateTimeoutFailsOpen(t *testing.T) {
	t.Parallel()
	s, pub, _ := controlServer(t, Control{Gate: true, HoldTimeout: 80 * time.Millisecond})
	ch, req := holdTool(t, s, pub)
	if r := reply(t, ch); len(r) != 0 {
		t.Fatalf("timeout replied %v", r)
	}
	to := pub.Find("attention.timeout")
	if len(to) != 1 || to[0].Subject != req.ID {
		t.Fatalf("timeout events %v", to)
	}
	// A late answer is refused, never applied.
	cmd := emittertest.Command(t, CmdRespond, gateSession, req.ID, map[string]any{"answer": map[string]any{"option": "deny"}})
	s.HandleCommand(context.Background(), cmd)
	rej := pub.Find("control.rejected")
	if len(rej) != 1 || rej[0].Cause != cmd.ID {
		t.Fatalf("late answer: %v", types(pub.All()))
	}
}

func TestGateSessionEndReleases(t *testing.T) {
	t.Parallel()
	s, pub, home := controlServer(t, Control{Gate: true})
	ch, _ := holdTool(t, s, pub)
	s.ingest(&delivery{payload: []byte(`{"hook_event_name":"SessionEnd","session_id":"gate-s","reason":"exit"}`), at: time.Now()}, false)
	if r := reply(t, ch); len(r) != 0 {
		t.Fatalf("release replied %v", r)
	}
	assertValidStream(t, readLog(t, home, gateSession))
}

func TestGateScopedByTool(t *testing.T) {
	t.Parallel()
	s, _, _ := controlServer(t, Control{Gate: true, GateTools: []string{"Write"}})
	out, _, _ := s.ingest(&delivery{payload: []byte(preTool), at: time.Now()}, false)
	if out.wait != nil {
		t.Fatal("Bash held although only Write is gated")
	}
}

func TestCommandDedupeAndUnsupported(t *testing.T) {
	t.Parallel()
	s, pub, _ := controlServer(t, Control{Gate: true})
	ch, req := holdTool(t, s, pub)
	cmd := emittertest.Command(t, CmdRespond, gateSession, req.ID, map[string]any{"answer": map[string]any{"option": "allow"}})
	s.HandleCommand(context.Background(), cmd)
	reply(t, ch)
	s.HandleCommand(context.Background(), cmd) // redelivery
	acks := pub.Find("control.accepted")
	if len(acks) != 2 {
		t.Fatalf("%d ack deliveries, want the recorded ack twice", len(acks))
	}
	a, _ := acks[0].Bytes()
	b, _ := acks[1].Bytes()
	if string(a) != string(b) {
		t.Fatalf("redelivered ack differs:\n%s\n%s", a, b)
	}
	if n := len(pub.Find("attention.answered")); n != 1 {
		t.Fatalf("command applied %d times", n)
	}
	pause := emittertest.Command(t, "control.pause", gateSession, "", map[string]any{})
	s.HandleCommand(context.Background(), pause)
	rej := pub.Find("control.rejected")
	rd, _ := rej[0].DataMap()
	if len(rej) != 1 || rd["reason"] != "unsupported" || rej[0].Cause != pause.ID {
		t.Fatalf("undeclared command: %v", rd)
	}
	assertValidStream(t, pub.All())
}

func TestNothingAcceptedWithoutToken(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	pub := &emittertest.Recorder{}
	s := newTestServer(t, home, func(cfg *Config) {
		cfg.Publisher = pub
		cfg.Control = Control{Gate: true, Instruct: true} // no relay token
	})
	if len(s.Accepts()) != 0 {
		t.Fatalf("accepts %v without a token", s.Accepts())
	}
	out, _, _ := s.ingest(&delivery{payload: []byte(preTool), at: time.Now()}, false)
	if out.wait != nil {
		t.Fatal("held a hook nobody could answer")
	}
	cmd := emittertest.Command(t, CmdInstruct, gateSession, "", map[string]any{"text": "x"})
	s.HandleCommand(context.Background(), cmd)
	rd, _ := pub.Find("control.rejected")[0].DataMap()
	if rd["reason"] != "unauthorized" {
		t.Fatalf("rejection %v", rd)
	}
}

func TestInstructQueue(t *testing.T) {
	t.Parallel()
	s, pub, _ := controlServer(t, Control{Instruct: true})
	sess := "ins"
	start := `{"hook_event_name":"SessionStart","session_id":"ins","source":"startup"}`
	s.ingest(&delivery{payload: []byte(start), at: time.Now()}, false)
	c1 := emittertest.Command(t, CmdInstruct, sess, "", map[string]any{"text": "use the staging registry"})
	c2 := emittertest.Command(t, CmdInstruct, sess, "", map[string]any{"text": "keep answers short"})
	s.HandleCommand(context.Background(), c1)
	s.HandleCommand(context.Background(), c2)
	if n := len(pub.Find("control.accepted")); n != 2 {
		t.Fatalf("%d accepted", n)
	}
	out, _, _ := s.ingest(&delivery{payload: []byte(`{"hook_event_name":"UserPromptSubmit","session_id":"ins","prompt":[{"type":"text","text":"go"}],"is_steer":false}`), at: time.Now()}, false)
	var r map[string]string
	json.Unmarshal(out.reply, &r)
	if r["message"] != "use the staging registry\n\nkeep answers short" {
		t.Fatalf("reply %q", out.reply)
	}
	del := pub.Find("x.kimi-code.instruction.delivered")
	if len(del) != 2 || del[0].Cause != c1.ID || del[1].Cause != c2.ID {
		t.Fatalf("delivered %v", types(del))
	}
	// Delivered once: the next prompt's reply is empty.
	out, _, _ = s.ingest(&delivery{payload: []byte(`{"hook_event_name":"UserPromptSubmit","session_id":"ins","prompt":[{"type":"text","text":"again"}],"is_steer":false}`), at: time.Now()}, false)
	if string(out.reply) != "{}" {
		t.Fatalf("second reply %q", out.reply)
	}
	// Caps: over-long text and a full queue are rejected invalid.
	long := emittertest.Command(t, CmdInstruct, sess, "", map[string]any{"text": strings.Repeat("x", MaxInstructionChars+1)})
	s.HandleCommand(context.Background(), long)
	for i := 0; i < MaxInstructions+1; i++ {
		s.HandleCommand(context.Background(), emittertest.Command(t, CmdInstruct, sess, "", map[string]any{"text": "n"}))
	}
	rej := pub.Find("control.rejected")
	if len(rej) != 2 {
		t.Fatalf("%d rejections, want the long one and the 21st", len(rej))
	}
	for _, e := range rej {
		d, _ := e.DataMap()
		if d["reason"] != "invalid" || d["detail"] != nil {
			t.Fatalf("rejection %v (the detail is gated at redacted; the posture is metadata)", d)
		}
	}
	// Session end drops what is still queued, one event per instruction.
	s.ingest(&delivery{payload: []byte(`{"hook_event_name":"SessionEnd","session_id":"ins","reason":"exit"}`), at: time.Now()}, false)
	if n := len(pub.Find("x.kimi-code.instruction.dropped")); n != MaxInstructions {
		t.Fatalf("%d dropped, want %d", n, MaxInstructions)
	}
	assertValidStream(t, pub.All())
}

// waitPublished polls pub until it holds an event of typ, or fails.
func waitPublished(t *testing.T, pub *emittertest.Recorder, typ string, within time.Duration) *aep.Event {
	t.Helper()
	var evs []*aep.Event
	if !poll.Until(within, func() bool { evs = pub.Find(typ); return len(evs) > 0 }) {
		t.Fatalf("no %s within %s: %v", typ, within, types(pub.All()))
	}
	return evs[0]
}

// A held hook whose connection ends before any answer (Kimi killed kimi-hook
// at its hook timeout) is recorded at once as expired, Kimi proceeding, over
// a real socket; a late answer is then refused.
func TestGateHookEndedRecordsProceed(t *testing.T) {
	t.Parallel()
	s, pub, home := controlServer(t, Control{Gate: true, HoldTimeout: time.Minute})
	base := runServer(t, s)
	s.ingest(&delivery{payload: []byte(`{"hook_event_name":"UserPromptSubmit","session_id":"gate-s","prompt":[{"type":"text","text":"go"}],"is_steer":false}`), at: time.Now()}, false)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/hook", strings.NewReader(preTool))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.token)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	ask := waitPublished(t, pub, "attention.requested", 5*time.Second)
	killed := time.Now()
	cancel() // the hook process dies: its connection closes
	<-done
	to := waitPublished(t, pub, "attention.timeout", 2*time.Second)
	if lag := time.Since(killed); lag > time.Second {
		t.Fatalf("the proceed was recorded %s after the hook ended", lag)
	}
	d, _ := to.DataMap()
	if to.Subject != ask.ID || d["reason"] != "hook-ended" || d["x-kimi-code-on-expiry"] != "allow" {
		t.Fatalf("timeout %s %v", to.Subject, d)
	}
	if n := len(pub.Find("attention.resolved")) + len(pub.Find("tool.denied")); n != 0 {
		t.Fatalf("a proceeding call was also resolved or denied: %v", types(pub.All()))
	}
	cmd := emittertest.Command(t, CmdRespond, gateSession, ask.ID, map[string]any{"answer": map[string]any{"option": "deny"}})
	s.HandleCommand(context.Background(), cmd)
	if rej := pub.Find("control.rejected"); len(rej) != 1 || rej[0].Cause != cmd.ID {
		t.Fatalf("a late answer was not refused: %v", types(pub.All()))
	}
	// The tool's own result still pairs with its request.
	s.ingest(&delivery{payload: []byte(`{"hook_event_name":"PostToolUse","session_id":"gate-s","tool_name":"Bash","tool_input":{"command":"rm -rf build"},"tool_call_id":"call_g1","tool_output":""}`), at: time.Now()}, false)
	if c := pub.Find("tool.completed"); len(c) != 1 || c[0].Cause != pub.Find("tool.requested")[0].ID {
		t.Fatalf("tool result: %v", types(pub.All()))
	}
	assertValidStream(t, readLog(t, home, gateSession))
}

// With on-timeout deny, the gate answers deny itself at its deadline:
// expired, denied by policy, and the model is told why.
func TestGateDeadlineDenies(t *testing.T) {
	t.Parallel()
	s, pub, home := controlServer(t, Control{Gate: true, HoldTimeout: 80 * time.Millisecond, OnTimeout: "deny"})
	ch, req := holdTool(t, s, pub)
	if d, _ := req.DataMap(); d["x-kimi-code-on-expiry"] != "deny" {
		t.Fatalf("request does not say what happens at its deadline: %v", d)
	}
	r := reply(t, ch)
	hso, _ := r["hookSpecificOutput"].(map[string]any)
	if hso["permissionDecision"] != "deny" || !strings.Contains(hso["permissionDecisionReason"].(string), "AEP_KIMI_ON_TIMEOUT=deny") {
		t.Fatalf("reply %v", r)
	}
	to := pub.Find("attention.timeout")
	den := pub.Find("tool.denied")
	if len(to) != 1 || len(den) != 1 || den[0].Cause != to[0].ID {
		t.Fatalf("stream %v", types(pub.All()))
	}
	if d, _ := to[0].DataMap(); d["reason"] != "deadline" || d["x-kimi-code-on-expiry"] != "deny" {
		t.Fatalf("timeout %v", d)
	}
	assertValidStream(t, readLog(t, home, gateSession))
}

// The gate's deadline stays inside the wait kimi-hook declares: the request
// says so in expires_at, and the hold ends there.
func TestGateDeadlineFromHookWait(t *testing.T) {
	t.Parallel()
	s, pub, _ := controlServer(t, Control{Gate: true, HoldTimeout: time.Minute})
	s.ingest(&delivery{payload: []byte(`{"hook_event_name":"UserPromptSubmit","session_id":"gate-s","prompt":[{"type":"text","text":"go"}],"is_steer":false}`), at: time.Now()}, false)
	now := time.Now()
	wait := GateReplyMargin + 150*time.Millisecond
	out, _, err := s.ingest(&delivery{payload: []byte(preTool), at: now, arrived: now, wait: wait}, false)
	if err != nil || out.wait == nil {
		t.Fatalf("not held: %v", err)
	}
	req := pub.Find("attention.requested")[0]
	d, _ := req.DataMap()
	exp, _ := time.Parse(time.RFC3339Nano, d["expires_at"].(string))
	if want := now.Add(150 * time.Millisecond); exp.Sub(want).Abs() > time.Millisecond {
		t.Fatalf("expires_at %s, want %s", exp, want)
	}
	if r := reply(t, out.wait); len(r) != 0 {
		t.Fatalf("reply %v", r)
	}
	if to := pub.Find("attention.timeout"); len(to) != 1 {
		t.Fatalf("stream %v", types(pub.All()))
	}
}

func TestGateArithmetic(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cases := []struct {
		name          string
		arrived       time.Duration // after at
		hold, wait    time.Duration
		wantAfterRead time.Duration
	}{
		{"no declared wait: the hold", 0, 50 * time.Second, 0, 50 * time.Second},
		{"a short hook: its wait less the reply margin", 10 * time.Millisecond, 50 * time.Second, 8500 * time.Millisecond, 8010 * time.Millisecond},
		{"a long hook: the hold", 0, 50 * time.Second, 58500 * time.Millisecond, 50 * time.Second},
		{"a wait shorter than the margin: at once", 0, 50 * time.Second, 200 * time.Millisecond, -300 * time.Millisecond},
	}
	for _, c := range cases {
		if got := gateDeadline(at, at.Add(c.arrived), c.hold, c.wait).Sub(at); got != c.wantAfterRead {
			t.Errorf("%s: deadline %s after the read, want %s", c.name, got, c.wantAfterRead)
		}
	}
	if w := GateWindow(10 * time.Second); w != 8*time.Second {
		t.Errorf("GateWindow(10s) = %s", w)
	}
	for hold, want := range map[time.Duration]int{50 * time.Second: 52, 8 * time.Second: 10, 8001 * time.Millisecond: 11, time.Millisecond: 3} {
		if got := NeededKimiTimeout(hold); got != want {
			t.Errorf("NeededKimiTimeout(%s) = %d, want %d", hold, got, want)
		}
		if GateWindow(time.Duration(NeededKimiTimeout(hold))*time.Second) < hold {
			t.Errorf("NeededKimiTimeout(%s) does not hold it", hold)
		}
	}
	for _, c := range []struct {
		ctl    Control
		want   time.Duration
		capped bool
	}{
		{Control{HoldTimeout: 50 * time.Second}, 50 * time.Second, false},
		{Control{HoldTimeout: 50 * time.Second, KimiTimeout: 60 * time.Second}, 50 * time.Second, false},
		{Control{HoldTimeout: 50 * time.Second, KimiTimeout: 10 * time.Second}, 8 * time.Second, true},
	} {
		if got, capped := c.ctl.Hold(); got != c.want || capped != c.capped {
			t.Errorf("%+v: Hold() = %s, %v", c.ctl, got, capped)
		}
	}
	if err := (Control{Gate: true, KimiTimeout: 2 * time.Second}).check(); err == nil || !strings.Contains(err.Error(), "aep-setup write kimi-code --control") {
		t.Errorf("a 2 s Kimi timeout: %v", err)
	}
	if err := (Control{OnTimeout: "maybe"}).check(); err == nil {
		t.Error("on-timeout maybe accepted")
	}
}

// A tool's result arriving while its call is still held (Kimi stopped
// waiting and ran it before the hook's connection ended) expires the
// request first: the stream never shows a tool finishing under an open
// request.
func TestGateResultWhileHeldExpiresFirst(t *testing.T) {
	t.Parallel()
	s, pub, home := controlServer(t, Control{Gate: true, HoldTimeout: time.Minute})
	ch, req := holdTool(t, s, pub)
	s.ingest(&delivery{payload: []byte(`{"hook_event_name":"PostToolUse","session_id":"gate-s","tool_name":"Bash","tool_input":{"command":"rm -rf build"},"tool_call_id":"call_g1","tool_output":""}`), at: time.Now()}, false)
	if r := reply(t, ch); len(r) != 0 {
		t.Fatalf("reply %v", r)
	}
	all := pub.All()
	var order []string
	for _, e := range all {
		if e.Type == "attention.timeout" || e.Type == "tool.completed" {
			order = append(order, e.Type)
		}
	}
	if strings.Join(order, ",") != "attention.timeout,tool.completed" || pub.Find("attention.timeout")[0].Subject != req.ID {
		t.Fatalf("stream %v", types(all))
	}
	assertValidStream(t, readLog(t, home, gateSession))
}
