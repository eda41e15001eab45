package adapter

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

// consumerStreams writes each capture's stream where the consumer fold's
// golden cases read it: go test ./adapter/ -run TestCapturedScenarios -consumer-streams
var consumerStreams = flag.Bool("consumer-streams", false,
	"write each capture's event stream to ../relay/consumer/testdata/streams (the consumer fold's recorded cases)")

// runsOf groups the run terminals by run id and checks each run has at most
// one terminal (the stream validator does too) and returns them in order.
func terminals(events []*aep.Event) []*aep.Event {
	var out []*aep.Event
	for _, e := range events {
		if aep.IsRunTerminal(e.Type) {
			out = append(out, e)
		}
	}
	return out
}

// Each harness capture, replayed in the order the capture hook saw it (the
// real arrival order, fire-and-forget races included), yields a valid stream
// with the runs, tools, attention and terminals that really happened.
func TestCapturedScenarios(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		check func(t *testing.T, ev []*aep.Event)
	}{
		{"basic", func(t *testing.T, ev []*aep.Event) {
			wantTypes(t, ev, map[string]int{"session.started": 1, "run.started": 1, "run.finished": 1, "tool.requested": 1, "tool.completed": 1})
			pairTools(t, ev)
			everyEventInRun(t, ev, "tool.requested", "tool.completed")
		}},
		{"tool-failure", func(t *testing.T, ev []*aep.Event) {
			wantTypes(t, ev, map[string]int{"run.started": 1, "run.finished": 1, "tool.requested": 2, "tool.failed": 2})
			pairTools(t, ev)
		}},
		{"stop-failure", func(t *testing.T, ev []*aep.Event) {
			wantTypes(t, ev, map[string]int{"run.started": 1, "run.failed": 1, "run.finished": 0})
		}},
		{"compact", func(t *testing.T, ev []*aep.Event) {
			wantTypes(t, ev, map[string]int{"run.started": 1, "run.finished": 1, "session.compacted": 1, "x.kimi-code.session.pre_compact": 1})
		}},
		{"subagent", func(t *testing.T, ev []*aep.Event) {
			// The subagent's own Stop (same session_id) must not close the
			// parent's run: one run, one terminal, and the subagent's turn
			// end lands in the extension namespace.
			wantTypes(t, ev, map[string]int{"run.started": 1, "run.finished": 1, "delegation.subagent.started": 1,
				"delegation.subagent.stopped": 1, "x.kimi-code.run.subagent_turn_ended": 1, "tool.requested": 2, "tool.completed": 2})
			fin := byType(ev, "run.finished")[0]
			if last := ev[len(ev)-1]; last.ID != fin.ID {
				t.Errorf("the parent's run.finished is not the last event: %s", last.Type)
			}
			pairTools(t, ev)
			stop := byType(ev, "delegation.subagent.stopped")[0]
			start := byType(ev, "delegation.subagent.started")[0]
			if stop.Cause != start.ID {
				t.Errorf("subagent stop not caused by its start")
			}
		}},
		{"background", func(t *testing.T, ev []*aep.Event) {
			// The background task's completion starts a turn with no
			// prompt: it gets an honest run of its own, triggered by the
			// agent, ended by its own Stop.
			wantTypes(t, ev, map[string]int{"run.started": 2, "run.finished": 2, "progress.status": 1, "x.kimi-code.progress.task_started": 1})
			starts := byType(ev, "run.started")
			d0, _ := starts[0].DataMap()
			d1, _ := starts[1].DataMap()
			if d0["trigger"] != "user" || d1["trigger"] != "agent" {
				t.Errorf("triggers %v %v, want user then agent", d0["trigger"], d1["trigger"])
			}
			note := byType(ev, "progress.status")[0]
			if note.Run != starts[1].Run {
				t.Errorf("the task notification is not inside the task's run")
			}
		}},
		{"web", func(t *testing.T, ev []*aep.Event) {
			// Four prompts: approved tool run; a slow prompt interrupted by
			// the user; a prompt queued behind it that runs next; a rejected
			// tool run. Then the session is archived.
			wantTypes(t, ev, map[string]int{"run.started": 4, "run.finished": 3, "run.cancelled": 1,
				"attention.requested": 2, "attention.answered": 2, "attention.resolved": 2, "tool.denied": 1,
				"session.ended": 1, "x.kimi-code.run.prompt_submitted": 1})
			cancelled := byType(ev, "run.cancelled")[0]
			d, _ := cancelled.DataMap()
			if d["by"] != "user" {
				t.Errorf("interrupted run cancelled by %v, want user", d["by"])
			}
			terms := terminals(ev)
			order := []string{"run.finished", "run.cancelled", "run.finished", "run.finished"}
			for i, want := range order {
				if terms[i].Type != want {
					t.Errorf("terminal %d is %s, want %s", i, terms[i].Type, want)
				}
			}
			if last := ev[len(ev)-1]; last.Type != "session.ended" {
				t.Errorf("last event %s, want session.ended", last.Type)
			}
			// Each answer follows its request by subject.
			reqs := byType(ev, "attention.requested")
			for _, a := range append(byType(ev, "attention.answered"), byType(ev, "attention.resolved")...) {
				if a.Subject != reqs[0].ID && a.Subject != reqs[1].ID {
					t.Errorf("%s subject %q names no request", a.Type, a.Subject)
				}
			}
			denied := byType(ev, "tool.denied")[0]
			dd, _ := denied.DataMap()
			if dd["by"] != "runtime" {
				t.Errorf("tool.denied by %v", dd["by"])
			}
		}},
		{"tui", func(t *testing.T, ev []*aep.Event) {
			wantTypes(t, ev, map[string]int{"attention.requested": 1, "attention.answered": 1, "attention.resolved": 1, "session.ended": 1})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			caps := loadCapture(t, c.name)
			home := t.TempDir()
			s := newTestServer(t, home, nil)
			feed(t, s, caps)
			ev := readLog(t, home, sessionOf(t, caps))
			assertValidStream(t, ev)
			c.check(t, ev)
			if t.Failed() {
				t.Logf("stream:\n%s", dump(ev))
			}
			if *consumerStreams && !t.Failed() {
				writeConsumerStream(t, home, sessionOf(t, caps), c.name)
			}
		})
	}
}

func wantTypes(t *testing.T, ev []*aep.Event, want map[string]int) {
	t.Helper()
	for typ, n := range want {
		if got := count(ev, typ); got != n {
			t.Errorf("%d %s, want %d", got, typ, n)
		}
	}
}

// pairTools checks every tool result is caused by the request of its call.
func pairTools(t *testing.T, ev []*aep.Event) {
	t.Helper()
	reqs := map[string]string{}
	for _, e := range ev {
		d, _ := e.DataMap()
		tool, _ := d["tool"].(map[string]any)
		id, _ := tool["call_id"].(string)
		switch e.Type {
		case "tool.requested":
			reqs[id] = e.ID
		case "tool.completed", "tool.failed":
			if e.Cause == "" || e.Cause != reqs[id] {
				t.Errorf("%s for %s caused by %q, want its request %q", e.Type, id, e.Cause, reqs[id])
			}
		}
	}
}

func everyEventInRun(t *testing.T, ev []*aep.Event, typs ...string) {
	t.Helper()
	for _, e := range ev {
		for _, typ := range typs {
			if e.Type == typ && e.Run == "" {
				t.Errorf("%s outside any run", e.Type)
			}
		}
	}
}

// writeConsumerStream copies a session's log, as the adapter wrote it, to
// the consumer package's recorded streams as capture-NAME.jsonl.
func writeConsumerStream(t *testing.T, home, session, name string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(logDir(home), LogFileName(session)))
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join("..", "relay", "consumer", "testdata", "streams", "capture-"+name+".jsonl")
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
