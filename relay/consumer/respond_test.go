package consumer

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
)

// What pending lists and why respond has no target, from one fold: none,
// one or several requests waiting, an unknown session pointing at pending,
// the candidates when several wait; --always makes the rule for the
// request's tool, or says why it cannot.
func TestPendingListAndTargets(t *testing.T) {
	now := time.Date(2026, 7, 3, 10, 13, 30, 0, time.UTC)
	seq := int64(0)
	req := func(session, data string) *aep.Event {
		e := &aep.Event{AEP: "0.1", ID: aep.NewID(), Type: "attention.requested", Subject: "Bash",
			Time: "2026-07-03T10:13:00.000Z", Source: "aep://h/agent/a/session/" + session, Agent: "a", Session: session,
			Seq: aep.Int64(seq), Data: json.RawMessage(data)}
		seq++
		return e
	}
	const gate = `{"kind":"permission","prompt":"run it?","respond_via":["control"],"expires_at":"2026-07-03T10:14:00Z","options":[{"id":"allow"},{"id":"deny"}]}`
	var out strings.Builder
	WritePendingList(&out, fold(nil), now, Hints{})
	if out.String() != "nothing waits on you\n" {
		t.Fatalf("none: %q", out.String())
	}
	one := req("s1", gate)
	f := fold([]*aep.Event{one, req("s2", gate), req("s2", gate)})
	out.Reset()
	WritePendingList(&out, f, now, Hints{})
	if !strings.HasPrefix(out.String(), "3 requests wait on you (oldest first):\n") || strings.Count(out.String(), "run it?") != 3 {
		t.Fatalf("three:\n%s", out.String())
	}
	// Hints fit the reader: no command for a watcher, the rule in place
	// of the countdown and the command for a request a rule answered.
	out.Reset()
	WritePendingList(&out, f, now, Hints{Watching: true})
	if strings.Contains(out.String(), "aep-kimi respond") || strings.Count(out.String(), "run it?") != 3 || !strings.Contains(out.String(), "your token watches") {
		t.Fatalf("a watcher's list:\n%s", out.String())
	}
	out.Reset()
	WritePendingList(&out, f, now, Hints{Rule: func(session, id string) string {
		if id == one.ID {
			return "rule r-1 answers it: deny"
		}
		return ""
	}})
	if strings.Count(out.String(), "aep-kimi respond") != 2 || !strings.Contains(out.String(), "rule r-1 answers it: deny") || strings.Count(out.String(), "30s left") != 2 {
		t.Fatalf("one request a rule answered:\n%s", out.String())
	}
	for _, c := range []struct {
		session, want string
		lines         int
	}{
		{"nobody", "respond: unknown session \"nobody\"", 1},
		{"s2", "respond: session s2 has 2 pending requests; name one:", 0},
	} {
		_, err := f.Target(c.session, "", now)
		var te *TargetError
		if !errors.As(err, &te) {
			t.Fatalf("%s: %v", c.session, err)
		}
		out.Reset()
		WriteTargetError(&out, "respond: ", f, te, now)
		if !strings.HasPrefix(out.String(), c.want) || (c.lines == 1 && !strings.HasSuffix(out.String(), "(see aep-kimi pending)\n")) {
			t.Fatalf("%s:\n%s", c.session, out.String())
		}
		if c.lines == 0 && strings.Count(out.String(), "run it?") != 2 {
			t.Fatalf("candidates not listed:\n%s", out.String())
		}
	}
	r, err := f.Target("s1", one.ID, now)
	if err != nil {
		t.Fatal(err)
	}
	if rule, err := f.Always(r, "allow", "*", "all"); err != nil || rule.Tool != "Bash" || string(rule.Effect) != "allow" {
		t.Fatalf("always: %+v %v", rule, err)
	}
	if _, err := f.Always(r, "allow", "*", "everywhere"); err == nil {
		t.Fatal("a scope that is none made a rule")
	}
}

// respond takes the short id labels print for the whole session id: a
// start of the id without Kimi's prefix, when one session's id begins so;
// a start several share is refused with their ids.
func TestTargetShortID(t *testing.T) {
	now := time.Date(2026, 7, 3, 10, 13, 30, 0, time.UTC)
	const gate = `{"kind":"permission","prompt":"run it?","respond_via":["control"],"expires_at":"2026-07-03T10:14:00Z","options":[{"id":"allow"},{"id":"deny"}]}`
	req := func(session string) *aep.Event {
		return &aep.Event{AEP: "0.1", ID: aep.NewID(), Type: "attention.requested", Subject: "Bash",
			Time: "2026-07-03T10:13:00.000Z", Source: "aep://h/agent/a/session/" + session, Agent: "a", Session: session,
			Seq: aep.Int64(0), Data: json.RawMessage(gate)}
	}
	a, b := "session_73700a68-b5bf-48db-a79a-430995754527", "session_73700b00-0000-4000-8000-000000000000"
	f := fold([]*aep.Event{req(a), req(b)})
	var out strings.Builder
	WritePendingList(&out, f, now, Hints{})
	if !strings.Contains(out.String(), "--option deny 73700a ") || strings.Contains(out.String(), "respond --option deny session_") {
		t.Fatalf("pending's command does not name the session by its short id:\n%s", out.String())
	}
	for arg, want := range map[string]string{"73700a": a, "session_73700b": b, a: a} {
		r, err := f.Target(arg, "", now)
		if err != nil || r.Session != want {
			t.Errorf("Target(%q) = %v, %v; want %s's request", arg, r, err, want)
		}
	}
	_, err := f.Target("73700", "", now)
	var te *TargetError
	if !errors.As(err, &te) || te.Problem != UnknownSession || !strings.Contains(te.Reason, a) || !strings.Contains(te.Reason, b) {
		t.Errorf("an ambiguous start: %v", err)
	}
}
