package bridgeweb

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/testkit/emittertest"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// framesFile is a real kimi web session (approve, compact, queue and abort,
// reject, heartbeat, archive): every WebSocket frame in arrival order, as
// internal/testkit/kimiharness's TestRecord recorded it.
const framesFile = "testdata/kimi-web-frames.jsonl"

// readHarnessFrames reads framesFile.
func readHarnessFrames() ([][]byte, error) {
	b, err := os.ReadFile(framesFile)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if line := bytes.TrimSpace(sc.Bytes()); len(line) > 0 {
			out = append(out, append([]byte(nil), line...))
		}
	}
	if len(out) < 100 {
		return nil, fmt.Errorf("%s has only %d frames", framesFile, len(out))
	}
	return out, nil
}

func harnessFrames(t testing.TB) [][]byte {
	t.Helper()
	frames, err := readHarnessFrames()
	if err != nil {
		t.Fatal(err)
	}
	return frames
}

// capturedSession is the id of the session the frames are about.
func capturedSession(t testing.TB, frames [][]byte) string {
	t.Helper()
	for _, raw := range frames {
		f, err := mapping.ParseFrame(raw)
		if err == nil && f.HasSeq && f.SessionID != "" && f.SessionID != mapping.GlobalSession {
			return f.SessionID
		}
	}
	t.Fatal("no session frame in " + framesFile)
	return ""
}

// sessionFrames parses the durable frames of the captured session (not the
// server-wide ones, which the link routes itself), volatile ones included.
func sessionFrames(t testing.TB) []mapping.Frame {
	t.Helper()
	var out []mapping.Frame
	for _, raw := range harnessFrames(t) {
		f, err := mapping.ParseFrame(raw)
		if err != nil {
			t.Fatal(err)
		}
		if f.HasSeq && f.SessionID != "" && f.SessionID != mapping.GlobalSession {
			out = append(out, f)
		}
	}
	return out
}

func counter() func() string {
	n := 0
	return func() string { n++; return fmt.Sprintf("id%03d", n) }
}

func frameTimeOf(f mapping.Frame) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, f.Timestamp)
	return t
}

// drafted is one machine output with the frame it came from.
type drafted struct {
	draft
	frame mapping.Frame
}

// runMachine feeds the machine as the link does: a volatile frame is only
// observed, a durable one mapped.
func runMachine(m *machine, frames []mapping.Frame) []drafted {
	var out []drafted
	for _, f := range frames {
		if f.Volatile {
			m.observe(f)
			continue
		}
		for _, d := range m.apply(f, frameTimeOf(f)) {
			out = append(out, drafted{d, f})
		}
	}
	return out
}

func countTypes(ds []drafted) map[string]int {
	m := map[string]int{}
	for _, d := range ds {
		m[d.ev.Type]++
	}
	return m
}

func TestMachineCompanion(t *testing.T) {
	t.Parallel()
	frames := sessionFrames(t)
	m := newMachine(mapping.Companion, mapping.DefaultPosture(), true, counter())
	out := runMachine(m, frames)
	durable := 0
	for _, f := range frames {
		if !f.Volatile && !strings.HasPrefix(f.Type, "permission.approval.") {
			durable++
		}
	}
	if len(out) != durable {
		t.Errorf("%d events for %d durable frames (companion maps each to one)", len(out), durable)
	}
	for _, d := range out {
		if !strings.HasPrefix(d.ev.Type, "x.kimi-code.web.") {
			t.Errorf("companion emitted %s", d.ev.Type)
		}
		if d.ev.Type != "x.kimi-code.web."+d.frame.Type {
			t.Errorf("frame %s became %s", d.frame.Type, d.ev.Type)
		}
		for k := range d.ev.Data {
			if !companionData[k] {
				t.Errorf("companion %s carries data %v", d.ev.Type, d.ev.Data)
			}
		}
		if d.run != "" || d.cause != "" {
			t.Errorf("companion %s carries run %q cause %q", d.ev.Type, d.run, d.cause)
		}
		if d.frame.Volatile {
			t.Errorf("volatile %s emitted", d.frame.Type)
		}
	}
}

// companionData are the only data members a companion event carries: the
// structural figures of tokens and compaction.
var companionData = map[string]bool{
	mapping.DataInputTokens: true, mapping.DataOutputTokens: true,
	mapping.DataContextTokens: true, mapping.DataContextLimit: true,
	"estimated_token_count": true, "forgotten": true,
}

// TestMachineTokens follows the recorded session's token figures in both
// modes: the events' usage adds up to the model steps' usage, and every
// step, turn and compaction of the main agent carries the context window
// as the frames last said it (the volatile status pulses included).
func TestMachineTokens(t *testing.T) {
	t.Parallel()
	frames := sessionFrames(t)
	var wantIn, wantOut int64
	for _, f := range frames {
		if f.Type == "turn.step.completed" && !f.Volatile {
			u, _ := f.Payload["usage"].(map[string]any)
			for _, k := range []string{"inputOther", "inputCacheRead", "inputCacheCreation"} {
				n, _ := u[k].(json.Number).Int64()
				wantIn += n
			}
			n, _ := u["output"].(json.Number).Int64()
			wantOut += n
		}
	}
	if wantIn == 0 || wantOut == 0 {
		t.Fatalf("the recorded session reports no usage (%d in, %d out)", wantIn, wantOut)
	}
	for _, mode := range []mapping.Mode{mapping.Companion, mapping.Primary} {
		t.Run(mode.String(), func(t *testing.T) {
			m := newMachine(mode, mapping.DefaultPosture(), false, counter())
			var in, out int64
			var window mapping.ContextWindow
			carried := 0
			for _, f := range frames {
				if c, ok := mapping.WebContext(f); ok {
					if c.Limit == 0 {
						c.Limit = window.Limit
					}
					window = c
				}
				for _, d := range runMachine(m, []mapping.Frame{f}) {
					if n, ok := d.ev.Data[mapping.DataInputTokens].(int64); ok {
						in += n
					}
					if n, ok := d.ev.Data[mapping.DataOutputTokens].(int64); ok {
						out += n
					}
					tokens, hasTokens := d.ev.Data[mapping.DataContextTokens]
					if !contextFrames[f.Type] {
						if hasTokens {
							t.Errorf("%s (from %s) carries the context window", d.ev.Type, f.Type)
						}
						continue
					}
					carried++
					if tokens != window.Tokens || d.ev.Data[mapping.DataContextLimit] != window.Limit {
						t.Errorf("%s at seq %d carries context %v of %v, want %d of %d", d.ev.Type, f.Seq,
							tokens, d.ev.Data[mapping.DataContextLimit], window.Tokens, window.Limit)
					}
				}
			}
			if in != wantIn || out != wantOut {
				t.Errorf("events carry %d input and %d output tokens, the steps %d and %d", in, out, wantIn, wantOut)
			}
			if carried == 0 || window.Limit == 0 {
				t.Errorf("no event carries the context window (last known %+v)", window)
			}
		})
	}
}

func TestMachinePrimary(t *testing.T) {
	t.Parallel()
	frames := sessionFrames(t)
	m := newMachine(mapping.Primary, mapping.DefaultPosture(), false, counter())
	out := runMachine(m, frames)
	got := countTypes(out)
	want := map[string]int{"run.started": 4, "run.finished": 3, "run.cancelled": 1, "tool.requested": 2,
		"tool.completed": 1, "tool.failed": 1, "attention.requested": 2, "attention.answered": 2,
		"attention.resolved": 2, "session.compacted": 1}
	for typ, n := range want {
		if got[typ] != n {
			t.Errorf("%d %s, want %d (all: %v)", got[typ], typ, n, got)
		}
	}
	byID := map[string]drafted{}
	for _, d := range out {
		byID[d.id] = d
		if d.frame.Volatile || strings.HasPrefix(d.frame.Type, "permission.approval.") {
			t.Errorf("%s emitted from %s", d.ev.Type, d.frame.Type)
		}
		if strings.HasPrefix(d.ev.Type, "session.") && d.ev.Type != "session.compacted" {
			t.Errorf("session lifecycle invented: %s", d.ev.Type)
		}
	}

	// Runs: the real turn boundaries, and every event inside a turn
	// carries its run; the prompt's own frames around it do not.
	open := ""
	for _, d := range out {
		switch d.ev.Type {
		case "run.started":
			if open != "" {
				t.Errorf("run %s started inside %s", d.run, open)
			}
			open = d.run
			continue
		case "run.finished", "run.failed", "run.cancelled":
			if d.run != open || d.cause == "" || byID[d.cause].ev.Type != "run.started" || byID[d.cause].run != open {
				t.Errorf("%s of run %q not caused by its start (open %q)", d.ev.Type, d.run, open)
			}
			if _, ok := d.ev.Data["duration_ms"]; !ok {
				t.Errorf("%s without duration_ms", d.ev.Type)
			}
			if d.ev.Type == "run.cancelled" && d.ev.Data["by"] != nil {
				t.Errorf("run.cancelled claims by=%v though the channel does not know who", d.ev.Data["by"])
			}
			open = ""
			continue
		}
		if d.run != open {
			t.Errorf("%s (frame %s seq %d) has run %q, want %q", d.ev.Type, d.frame.Type, d.frame.Seq, d.run, open)
		}
	}

	// Tools pair by call id, the name re-attached to the result.
	for _, d := range out {
		if d.ev.Type != "tool.completed" && d.ev.Type != "tool.failed" {
			continue
		}
		req := byID[d.cause]
		if req.ev.Type != "tool.requested" {
			t.Fatalf("%s not caused by a tool.requested", d.ev.Type)
		}
		rt, _ := req.ev.Data["tool"].(map[string]any)
		dt, _ := d.ev.Data["tool"].(map[string]any)
		if dt["name"] != "Bash" || dt["call_id"] != rt["call_id"] || d.ev.Subject != "Bash" || d.run != req.run {
			t.Errorf("%s %v does not pair with %v", d.ev.Type, dt, rt)
		}
	}

	// Attention: answered then resolved, their subject the request's id.
	var answers []string
	for _, d := range out {
		switch d.ev.Type {
		case "attention.requested":
			if !strings.HasPrefix(d.ev.Subject, "approval_") {
				t.Errorf("request subject %q", d.ev.Subject)
			}
			if rv, _ := d.ev.Data["respond_via"].([]any); len(rv) != 1 || rv[0] != "oob" {
				t.Errorf("observed request respond_via %v, want [oob]", d.ev.Data["respond_via"])
			}
			if _, ok := d.ev.Data["options"]; ok {
				t.Error("observed request offers options")
			}
			if exp, ok := d.ev.Data["expires_at"]; ok {
				t.Errorf("request has a deadline (%v) nothing acts on", exp)
			}
		case "attention.answered", "attention.resolved":
			req := byID[d.subject]
			if req.ev.Type != "attention.requested" || d.run != req.run {
				t.Errorf("%s subject %q is not its request's id", d.ev.Type, d.subject)
			}
			if d.ev.Type == "attention.answered" {
				if d.cause != d.subject || d.ev.Data["via"] != "oob" {
					t.Errorf("answered cause %q via %v", d.cause, d.ev.Data["via"])
				}
				ans, _ := d.ev.Data["answer"].(map[string]any)
				answers = append(answers, fmt.Sprint(ans["option"], "/", ans["text"]))
			} else if byID[d.cause].ev.Type != "attention.answered" || d.ev.Data["resolution"] != "answered" {
				t.Errorf("resolved not caused by its answer: %v", d.ev.Data)
			}
		}
	}
	if got := strings.Join(answers, ","); got != "approved/<nil>,rejected/not allowed in this test" {
		t.Errorf("answers %s", got)
	}
	if len(m.runs) != 0 || len(m.tools) != 0 || len(m.asks) != 0 || m.stale != 0 {
		t.Errorf("state left open: runs %d tools %d asks %d stale %d", len(m.runs), len(m.tools), len(m.asks), m.stale)
	}
}

// findFrame returns the first captured frame of a type.
func findFrame(t *testing.T, frames []mapping.Frame, typ string, nth int) mapping.Frame {
	t.Helper()
	for _, f := range frames {
		if f.Type == typ {
			if nth == 0 {
				return f
			}
			nth--
		}
	}
	t.Fatalf("no %s frame", typ)
	return mapping.Frame{}
}

func TestMachineControlDecoration(t *testing.T) {
	t.Parallel()
	frames := sessionFrames(t)
	req := findFrame(t, frames, "event.approval.requested", 0)
	for _, c := range []struct {
		name      string
		attention aep.Capture
		labels    []string
	}{
		{"redacted", aep.CaptureRedacted, []string{"Approve", "Approve for this session", "Reject"}},
		{"metadata: ids as labels", aep.CaptureMetadata, []string{OptApprove, OptApproveSession, OptReject}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mapping.DefaultPosture()
			p.AttentionCapture = c.attention
			m := newMachine(mapping.Primary, p, true, counter())
			ds := m.apply(req, frameTimeOf(req))
			if len(ds) != 1 {
				t.Fatalf("%d drafts", len(ds))
			}
			data := ds[0].ev.Data
			if rv, _ := data["respond_via"].([]any); len(rv) != 1 || rv[0] != "control" {
				t.Errorf("respond_via %v", data["respond_via"])
			}
			opts, _ := data["options"].([]any)
			var ids, labels []string
			for _, o := range opts {
				om := o.(map[string]any)
				ids = append(ids, om["id"].(string))
				labels = append(labels, om["label"].(string))
			}
			if strings.Join(ids, ",") != "approved,approved_session,rejected" || strings.Join(labels, ",") != strings.Join(c.labels, ",") {
				t.Errorf("options %v / %v", ids, labels)
			}
			// The envelope keeps them at this capture level.
			ev := &aep.Event{ID: "x", Source: "aep://h/a", Agent: "kimi-code", Session: "s", Seq: aep.Int64(0), Epoch: aep.Int64(1), Time: aep.FormatTime(time.Now())}
			if err := ds[0].ev.Envelope(ev); err != nil {
				t.Fatal(err)
			}
			if err := aep.Validate(ev); err != nil {
				t.Errorf("decorated request invalid: %v", err)
			}
		})
	}
	t.Run("control off in companion", func(t *testing.T) {
		m := newMachine(mapping.Companion, mapping.DefaultPosture(), true, counter())
		if m.control {
			t.Error("a companion machine decorates for control")
		}
	})
}

// frameWith rewrites a captured frame's payload members.
func frameWith(t *testing.T, f mapping.Frame, set map[string]any) mapping.Frame {
	t.Helper()
	pl := map[string]any{}
	for k, v := range f.Payload {
		pl[k] = v
	}
	for k, v := range set {
		if v == nil {
			delete(pl, k)
		} else {
			pl[k] = v
		}
	}
	f.Payload = pl
	return f
}

func TestMachineControlOutcomes(t *testing.T) {
	t.Parallel()
	frames := sessionFrames(t)
	started := findFrame(t, frames, "turn.started", 0)
	req := findFrame(t, frames, "event.approval.requested", 0)
	resolved := findFrame(t, frames, "event.approval.resolved", 0)

	t.Run("a posted decision is answered via control, caused by the command", func(t *testing.T) {
		m := newMachine(mapping.Primary, mapping.DefaultPosture(), true, counter())
		m.apply(started, frameTimeOf(started))
		r := m.apply(req, frameTimeOf(req))[0]
		ask := m.byReq[r.id]
		if ask == nil {
			t.Fatal("request not recorded by its event id")
		}
		ask.decision = &pendingCmd{cmdID: "cmd1", by: "ops", option: OptApproveSession, decision: "approved"}
		f := frameWith(t, resolved, map[string]any{"scope": "session"})
		ds := m.apply(f, frameTimeOf(f))
		if len(ds) != 2 {
			t.Fatalf("%d drafts", len(ds))
		}
		a, z := ds[0], ds[1]
		ans := a.ev.Data["answer"].(map[string]any)
		if a.ev.Type != "attention.answered" || a.ev.Data["via"] != "control" || a.ev.Data["by"] != "ops" ||
			a.cause != "cmd1" || a.subject != r.id || ans["option"] != OptApproveSession {
			t.Errorf("answered %+v data %v", a, a.ev.Data)
		}
		if z.ev.Type != "attention.resolved" || z.cause != "cmd1" || z.subject != r.id {
			t.Errorf("resolved %+v", z)
		}
	})
	t.Run("a decision made in Kimi's UI while control is on is via oob", func(t *testing.T) {
		m := newMachine(mapping.Primary, mapping.DefaultPosture(), true, counter())
		r := m.apply(req, frameTimeOf(req))[0]
		f := frameWith(t, resolved, map[string]any{"scope": "session"})
		ds := m.apply(f, frameTimeOf(f))
		ans := ds[0].ev.Data["answer"].(map[string]any)
		if ds[0].ev.Data["via"] != "oob" || ds[0].cause != r.id || ans["option"] != OptApproveSession {
			t.Errorf("answered %v cause %s", ds[0].ev.Data, ds[0].cause)
		}
	})
	t.Run("a dismissal resolves dismissed", func(t *testing.T) {
		m := newMachine(mapping.Primary, mapping.DefaultPosture(), false, counter())
		r := m.apply(req, frameTimeOf(req))[0]
		f := frameWith(t, resolved, map[string]any{"decision": "cancelled"})
		ds := m.apply(f, frameTimeOf(f))
		if len(ds) != 1 || ds[0].ev.Type != "attention.resolved" || ds[0].ev.Data["resolution"] != "dismissed" || ds[0].subject != r.id {
			t.Errorf("%+v", ds)
		}
	})
	t.Run("a cancel the bridge posted closes the run by control", func(t *testing.T) {
		m := newMachine(mapping.Primary, mapping.DefaultPosture(), true, counter())
		s := m.apply(started, frameTimeOf(started))[0]
		m.mainRun().cancel = &pendingCmd{cmdID: "cmd2"}
		ended := frameWith(t, findFrame(t, frames, "turn.ended", 1), map[string]any{"turnId": started.Payload["turnId"]})
		ds := m.apply(ended, frameTimeOf(ended))
		if len(ds) != 1 || ds[0].ev.Type != "run.cancelled" || ds[0].ev.Data["by"] != "control" || ds[0].cause != "cmd2" || ds[0].run != s.run {
			t.Errorf("%+v %v", ds, ds[0].ev.Data)
		}
	})
}

func TestMachineDegrades(t *testing.T) {
	t.Parallel()
	frames := sessionFrames(t)
	m := newMachine(mapping.Primary, mapping.DefaultPosture(), false, counter())
	for _, c := range []struct{ frame, want string }{
		{"tool.result", "x.kimi-code.web.tool.result"},
		{"turn.ended", "x.kimi-code.web.turn.ended"},
		{"event.approval.resolved", "x.kimi-code.web.event.approval.resolved"},
	} {
		f := findFrame(t, frames, c.frame, 0)
		ds := m.apply(f, frameTimeOf(f))
		if len(ds) != 1 || ds[0].ev.Type != c.want {
			t.Errorf("unpaired %s: %+v", c.frame, ds)
		}
	}
	// A turn that starts while another is open: the old run is dropped
	// (its end was lost), the new one carries on.
	st := findFrame(t, frames, "turn.started", 0)
	m.apply(st, frameTimeOf(st))
	m.apply(st, frameTimeOf(st))
	if m.stale != 1 || len(m.runs) != 1 {
		t.Errorf("stale %d runs %d", m.stale, len(m.runs))
	}
	// Volatile frames and bus echoes never emit.
	for _, f := range frames {
		if f.Volatile || strings.HasPrefix(f.Type, "permission.approval.") {
			if ds := m.apply(f, frameTimeOf(f)); len(ds) != 0 {
				t.Errorf("%s emitted %d", f.Type, len(ds))
			}
		}
	}
}

func TestMachineFold(t *testing.T) {
	t.Parallel()
	frames := sessionFrames(t)
	// Stop in the middle of the first turn, just after the tool started.
	cut := 0
	for i, f := range frames {
		if f.Type == "tool.call.started" {
			cut = i + 1
			break
		}
	}
	first := newMachine(mapping.Primary, mapping.DefaultPosture(), false, counter())
	var events []*aep.Event
	for _, d := range runMachine(first, frames[:cut]) {
		ev := &aep.Event{ID: d.id, Run: d.run, Cause: d.cause, Time: aep.FormatTime(frameTimeOf(d.frame))}
		if err := d.ev.Envelope(ev); err != nil {
			t.Fatal(err)
		}
		if d.subject != "" {
			ev.Subject = d.subject
		}
		if d.turn != "" {
			ev.SetExt(ExtKimiTurn, d.turn)
		}
		b, _ := json.Marshal(ev)
		parsed, err := aep.ParseEvent(b)
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, parsed)
	}
	second := newMachine(mapping.Primary, mapping.DefaultPosture(), false, counter())
	for _, ev := range events {
		second.fold(ev)
	}
	if len(second.runs) != 1 || len(second.tools) != 1 {
		t.Fatalf("recovered runs %d tools %d", len(second.runs), len(second.tools))
	}
	rest := runMachine(second, frames[cut:])
	got := countTypes(rest)
	if got["tool.completed"] != 1 || got["run.finished"] != 3 || got["x.kimi-code.web.tool.result"] != 0 || got["x.kimi-code.web.turn.ended"] != 0 {
		t.Errorf("after recovery: %v", got)
	}
	for _, d := range rest {
		if d.ev.Type == "tool.completed" && d.cause != events[len(events)-1].ID {
			t.Errorf("recovered tool result caused by %s", d.cause)
		}
	}
}

// BenchmarkFramePath is the whole frame path (parse, dedupe, map, sequence,
// log, publish) over the captured session, per frame.
func BenchmarkFramePath(b *testing.B) {
	frames := harnessFrames(b)
	sid := capturedSession(b, frames)
	for _, mode := range []mapping.Mode{mapping.Companion, mapping.Primary} {
		b.Run(mode.String(), func(b *testing.B) {
			br, err := NewBridge(Config{Config: emitter.Config{Home: b.TempDir(), Host: "h", Publisher: &emittertest.Recorder{},
				Logger: slog.New(slog.DiscardHandler)}, KimiHome: b.TempDir(), Mode: mode})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			n := 0
			for i := 0; b.Loop(); i++ {
				// A fresh session each round, so nothing dedupes away.
				l := newLink(newFollower(br, Instance{}), func(context.Context, []byte) error { return nil })
				id := fmt.Sprintf("s%d", i)
				l.subs[id] = subLive
				for _, f := range frames {
					l.handle(context.Background(), bytes.ReplaceAll(f, []byte(sid), []byte(id)))
					n++
				}
				br.core.Evict(id)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/frame")
		})
	}
}
