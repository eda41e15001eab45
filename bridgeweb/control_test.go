package bridgeweb

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/emittertest"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// controlStack is a primary bridge with control on, connected to a scripted
// kap-server, with one turn running and one approval pending.
type controlStack struct {
	tb  *testBridge
	k   *fakeKap
	kc  *kapConn
	req *aep.Event // the attention.requested
	seq int64
}

func newControlStack(t *testing.T, edit func(*Config)) *controlStack {
	t.Helper()
	k := newFakeKap(t, "tok", "s1")
	tb := startBridge(t, k, mapping.Primary, "", func(c *Config) {
		c.Control = Control{Enabled: true, Authenticated: true}
		if edit != nil {
			edit(c)
		}
	})
	kc := <-k.conns
	kc.ack(t, kc.next(t, "subscribe"), nil, map[string][2]any{"s1": {0, "A"}})
	cs := &controlStack{tb: tb, k: k, kc: kc}
	cs.send(t, "turn.started", map[string]any{"turnId": 0, "promptId": "msg_1", "origin": map[string]any{"kind": "user"}})
	cs.send(t, "event.approval.requested", map[string]any{"approval_id": "approval_1", "tool_call_id": "c1",
		"tool_name": "Bash", "action": "Running: echo hi", "expires_at": "2026-11-30T12:00:00.000Z", "turn_id": 0})
	evs := tb.pub.Wait(t, "the request", func(evs []*aep.Event) bool { return len(evs) == 2 })
	cs.req = evs[1]
	return cs
}

func (cs *controlStack) send(t *testing.T, typ string, payload map[string]any) {
	t.Helper()
	cs.seq++
	cs.kc.send(t, frame("s1", "A", cs.seq, typ, payload))
}

func (cs *controlStack) ack(t *testing.T, cmd *aep.Event) *aep.Event {
	t.Helper()
	cs.tb.HandleCommand(context.Background(), cmd)
	for _, e := range cs.tb.pub.All() {
		if (e.Type == "control.accepted" || e.Type == "control.rejected") && e.Cause == cmd.ID {
			return e
		}
	}
	t.Fatalf("no ack for %s", cmd.ID)
	return nil
}

func reasonOf(e *aep.Event) string {
	if e.Type == "control.accepted" {
		return "accepted"
	}
	d, _ := e.DataMap()
	return fmt.Sprint(d["reason"])
}

func (cs *controlStack) posted() []map[string]any {
	cs.k.mu.Lock()
	defer cs.k.mu.Unlock()
	return append([]map[string]any(nil), cs.k.posted...)
}

func TestRespond(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		answer map[string]any
		want   string // ack reason
		body   string // what reached the kap-server
		option string // the recorded answer option
	}{
		{"option approved", map[string]any{"option": "approved"}, "accepted", "approved  ", OptApprove},
		{"option for the session", map[string]any{"option": "approved_session"}, "accepted", "approved session ", OptApproveSession},
		{"alias deny with a reason", map[string]any{"option": "deny", "text": "not today"}, "accepted", "rejected  not today", OptReject},
		{"text naming a label", map[string]any{"text": "  approve "}, "accepted", "approved  ", OptApprove},
		{"text naming a label with scope", map[string]any{"text": "Approve for this session"}, "accepted", "approved session ", OptApproveSession},
		{"text naming an id", map[string]any{"text": "REJECTED"}, "accepted", "rejected  ", OptReject},
		{"other text never approves", map[string]any{"text": "yes but use staging"}, "accepted", "rejected  yes but use staging", OptReject},
		{"unknown option", map[string]any{"option": "maybe"}, "invalid", "", ""},
		{"empty answer", map[string]any{}, "invalid", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs := newControlStack(t, nil)
			cmd := emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": c.answer})
			ack := cs.ack(t, cmd)
			if got := reasonOf(ack); got != c.want {
				t.Fatalf("ack %s, want %s", got, c.want)
			}
			posted := cs.posted()
			if c.body == "" {
				if len(posted) != 0 {
					t.Errorf("a refused answer reached the server: %v", posted)
				}
				return
			}
			if len(posted) != 1 {
				t.Fatalf("posted %v", posted)
			}
			p := posted[0]
			got := fmt.Sprintf("%v %v %v", p["decision"], orEmpty(p["scope"]), orEmpty(p["feedback"]))
			if got != c.body || p["approval_id"] != "approval_1" {
				t.Errorf("posted %q to %v, want %q", got, p["approval_id"], c.body)
			}
			// The outcome comes from the server's broadcast.
			resolved := map[string]any{"approval_id": "approval_1", "decision": p["decision"]}
			if p["scope"] != nil {
				resolved["scope"] = p["scope"]
			}
			if p["feedback"] != nil {
				resolved["feedback"] = p["feedback"]
			}
			cs.send(t, "event.approval.resolved", resolved)
			evs := cs.tb.pub.Wait(t, "the outcome", func(evs []*aep.Event) bool { return len(evs) == 5 })
			answered, res := evs[3], evs[4]
			ad, _ := answered.DataMap()
			ans, _ := ad["answer"].(map[string]any)
			if answered.Type != "attention.answered" || ad["via"] != "control" || ad["by"] != "dashboard" ||
				answered.Cause != cmd.ID || answered.Subject != cs.req.ID || ans["option"] != c.option {
				t.Errorf("answered %s via %v by %v cause %s subject %s option %v", answered.Type, ad["via"], ad["by"], answered.Cause, answered.Subject, ans["option"])
			}
			if res.Type != "attention.resolved" || res.Cause != cmd.ID || res.Subject != cs.req.ID {
				t.Errorf("resolved %s cause %s", res.Type, res.Cause)
			}
			if ack.Seq == nil || *ack.Seq >= *answered.Seq {
				t.Error("the ack does not precede the outcome")
			}
		})
	}
}

func orEmpty(v any) any {
	if v == nil {
		return ""
	}
	return v
}

func TestRespondRefusals(t *testing.T) {
	t.Parallel()
	t.Run("unknown subject", func(t *testing.T) {
		cs := newControlStack(t, nil)
		if r := reasonOf(cs.ack(t, emittertest.Command(t, CmdRespond, "s1", "nope", map[string]any{"answer": map[string]any{"option": "approved"}}))); r != "invalid" {
			t.Errorf("ack %s", r)
		}
	})
	t.Run("already resolved on the server", func(t *testing.T) {
		cs := newControlStack(t, nil)
		cs.k.mu.Lock()
		cs.k.resolved = true
		cs.k.mu.Unlock()
		if r := reasonOf(cs.ack(t, emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": map[string]any{"option": "approved"}}))); r != "invalid" {
			t.Errorf("ack %s", r)
		}
	})
	t.Run("no relay token: nothing accepted", func(t *testing.T) {
		cs := newControlStack(t, func(c *Config) { c.Control.Authenticated = false })
		if r := reasonOf(cs.ack(t, emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": map[string]any{"option": "approved"}}))); r != "unauthorized" {
			t.Errorf("ack %s", r)
		}
		if len(cs.posted()) != 0 {
			t.Error("posted without authentication")
		}
	})
	t.Run("control off", func(t *testing.T) {
		cs := newControlStack(t, func(c *Config) { c.Control.Enabled = false })
		// Ratings only: they actuate nothing.
		if a := cs.tb.Accepts(); len(a) != 1 || a[0] != mapping.TypeRate {
			t.Errorf("accepts %v", cs.tb.Accepts())
		}
		d, _ := cs.req.DataMap()
		if rv := fmt.Sprint(d["respond_via"]); rv != "[oob]" || d["options"] != nil {
			t.Errorf("request without control: respond_via %s options %v", rv, d["options"])
		}
		if r := reasonOf(cs.ack(t, emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": map[string]any{"option": "approved"}}))); r != "unsupported" {
			t.Errorf("ack %s", r)
		}
	})
	t.Run("undeclared command", func(t *testing.T) {
		cs := newControlStack(t, nil)
		if r := reasonOf(cs.ack(t, emittertest.Command(t, "control.pause", "s1", "", map[string]any{}))); r != "unsupported" {
			t.Errorf("ack %s", r)
		}
	})
	t.Run("redelivery re-publishes the recorded ack byte-identically", func(t *testing.T) {
		cs := newControlStack(t, nil)
		cmd := emittertest.Command(t, CmdRespond, "s1", cs.req.ID, map[string]any{"answer": map[string]any{"option": "approved"}})
		first := cs.ack(t, cmd)
		firstBytes, _ := first.Bytes()
		cs.tb.HandleCommand(context.Background(), cmd)
		evs := cs.tb.pub.All()
		last, _ := evs[len(evs)-1].Bytes()
		n := 0
		for _, e := range evs {
			if b, _ := e.Bytes(); bytes.Equal(b, firstBytes) {
				n++
			}
		}
		if !bytes.Equal(last, firstBytes) || n != 2 {
			t.Errorf("redelivery published %s (%d copies)", last, n)
		}
		if len(cs.posted()) != 1 {
			t.Errorf("the decision was posted %d times", len(cs.posted()))
		}
	})
}

func TestCompanionAcceptsNothing(t *testing.T) {
	t.Parallel()
	k := newFakeKap(t, "tok", "s1")
	tb := startBridge(t, k, mapping.Companion, "", func(c *Config) { c.Control = Control{Enabled: true, Authenticated: true} })
	kc := <-k.conns
	kc.ack(t, kc.next(t, "subscribe"), nil, map[string][2]any{"s1": {0, "A"}})
	if len(tb.Accepts()) != 0 {
		t.Fatalf("companion accepts %v", tb.Accepts())
	}
	cmd := emittertest.Command(t, CmdCancel, "s1.web", "", map[string]any{"scope": "run"})
	tb.HandleCommand(context.Background(), cmd)
	evs := tb.pub.Wait(t, "the nack", func(evs []*aep.Event) bool { return len(evs) == 1 })
	if evs[0].Type != "control.rejected" || reasonOf(evs[0]) != "unsupported" || evs[0].Session != "s1.web" {
		t.Errorf("%s %s in %s", evs[0].Type, reasonOf(evs[0]), evs[0].Session)
	}
	if ks, _ := evs[0].ExtString(ExtKimiSession); ks != "s1" {
		t.Errorf("companion ack kimisession %q", ks)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	t.Run("scope session is refused", func(t *testing.T) {
		cs := newControlStack(t, nil)
		if r := reasonOf(cs.ack(t, emittertest.Command(t, CmdCancel, "s1", "", map[string]any{"scope": "session"}))); r != "refused" {
			t.Errorf("ack %s", r)
		}
	})
	t.Run("another run than the running one", func(t *testing.T) {
		cs := newControlStack(t, nil)
		cmd := emittertest.Command(t, CmdCancel, "s1", "", map[string]any{"scope": "run"})
		cmd.Run = "not-this-run"
		cmd.ClearRaw()
		if r := reasonOf(cs.ack(t, cmd)); r != "invalid" {
			t.Errorf("ack %s", r)
		}
	})
	t.Run("no prompt running on the server", func(t *testing.T) {
		cs := newControlStack(t, nil)
		if r := reasonOf(cs.ack(t, emittertest.Command(t, CmdCancel, "s1", "", map[string]any{"scope": "run"}))); r != "invalid" {
			t.Errorf("ack %s", r)
		}
	})
	t.Run("the running prompt is aborted; turn.ended closes the run by control", func(t *testing.T) {
		cs := newControlStack(t, nil)
		cs.k.mu.Lock()
		cs.k.active = "msg_1"
		cs.k.mu.Unlock()
		cmd := emittertest.Command(t, CmdCancel, "s1", "", map[string]any{"scope": "run"})
		cmd.Run = cs.req.Run
		cmd.ClearRaw()
		if r := reasonOf(cs.ack(t, cmd)); r != "accepted" {
			t.Fatalf("ack %s", r)
		}
		cs.k.mu.Lock()
		aborted := fmt.Sprint(cs.k.aborted)
		cs.k.mu.Unlock()
		if aborted != "[msg_1:abort]" {
			t.Errorf("aborted %s", aborted)
		}
		cs.send(t, "event.approval.resolved", map[string]any{"approval_id": "approval_1", "decision": "cancelled"})
		cs.send(t, "turn.ended", map[string]any{"turnId": 0, "reason": "cancelled", "durationMs": 1234})
		evs := cs.tb.pub.Wait(t, "the run's end", func(evs []*aep.Event) bool { return len(evs) == 5 })
		dismissed, end := evs[3], evs[4]
		dd, _ := dismissed.DataMap()
		if dismissed.Type != "attention.resolved" || dd["resolution"] != "dismissed" || dismissed.Subject != cs.req.ID {
			t.Errorf("dismissal %s %v", dismissed.Type, dd)
		}
		ed, _ := end.DataMap()
		if end.Type != "run.cancelled" || ed["by"] != "control" || end.Cause != cmd.ID || end.Run != cs.req.Run || fmt.Sprint(ed["duration_ms"]) != "1234" {
			t.Errorf("end %s %v cause %s", end.Type, ed, end.Cause)
		}
		validStream(t, evs)
	})
}

// A kimi web run is rated through the bridge, control on or off: the
// feedback lands in the run's session, on the run, after its terminal.
// (The bridge's ack path once dropped the entry's run.)
func TestRateWebRun(t *testing.T) {
	t.Parallel()
	cs := newControlStack(t, func(c *Config) { c.Control.Enabled = false })
	cs.send(t, "turn.ended", map[string]any{"reason": "completed"})
	fin := cs.tb.pub.Wait(t, "the run's end", func(evs []*aep.Event) bool {
		for _, e := range evs {
			if aep.IsRunTerminal(e.Type) {
				return true
			}
		}
		return false
	})
	var terminal *aep.Event
	for _, e := range fin {
		if aep.IsRunTerminal(e.Type) {
			terminal = e
		}
	}
	cmd := emittertest.Command(t, mapping.TypeRate, "s1", "", map[string]any{"rating": -1})
	cmd.Run = terminal.Run
	if err := cmd.SetExt(mapping.ExtBy, "alice"); err != nil {
		t.Fatal(err)
	}
	if r := reasonOf(cs.ack(t, cmd)); r != "accepted" {
		t.Fatalf("ack %s", r)
	}
	fb := cs.tb.pub.Find(mapping.TypeFeedback)
	if len(fb) != 1 || fb[0].Run != terminal.Run || fb[0].Cause != terminal.ID || fb[0].Session != terminal.Session {
		t.Fatalf("feedback %v, terminal %v", fb, terminal)
	}
	if err := aep.Validate(fb[0]); err != nil {
		t.Fatal(err)
	}
}

// kap-server's expires_at is not a deadline: an approval past it still waits
// in Kimi and is still answered through the bridge, so its request says no
// deadline a consumer would drop it at.
func TestApprovalPastKapExpiry(t *testing.T) {
	t.Parallel()
	cs := newControlStack(t, nil)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	cs.send(t, "event.approval.requested", map[string]any{"approval_id": "approval_2", "tool_call_id": "c2",
		"tool_name": "Bash", "action": "Running: echo late", "expires_at": past, "turn_id": 0})
	req := cs.tb.pub.Wait(t, "the second request", func(evs []*aep.Event) bool { return len(evs) == 3 })[2]
	d, _ := req.DataMap()
	if exp, ok := d["expires_at"]; ok {
		t.Errorf("request carries kap's expires_at %v as its deadline", exp)
	}
	if _, ok := d[mapping.DataOnExpiry]; ok {
		t.Errorf("request says %v happens at a deadline it has not", d[mapping.DataOnExpiry])
	}
	if fmt.Sprint(d["respond_via"]) != "[control]" {
		t.Errorf("respond_via %v", d["respond_via"])
	}
	cmd := emittertest.Command(t, CmdRespond, "s1", req.ID, map[string]any{"answer": map[string]any{"option": "approved"}})
	if r := reasonOf(cs.ack(t, cmd)); r != "accepted" {
		t.Fatalf("answer past kap's expires_at: %s", r)
	}
	if p := cs.posted(); len(p) != 1 || p[0]["approval_id"] != "approval_2" || p[0]["decision"] != "approved" {
		t.Errorf("posted %v", p)
	}
}
