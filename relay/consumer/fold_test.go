package consumer

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
)

// The fold's golden cases: testdata/fold/NAME.json is the Projection of
//
//   - testdata/streams/NAME.jsonl, our own streams (capture-*: real Kimi
//     sessions recorded by the adapter's capture scenarios), or
//   - for NAME upstream, the upstream golden corpus ($AEP_FIXTURES
//     fixtures/golden/golden.jsonl).
//
// fleetpage's Node test derives the same cases with assets/state.js and
// compares them to the same files: the rule above is implemented twice.
const upstreamCase = "upstream"

type foldCase struct {
	name   string
	events []*aep.Event
}

// foldCases lists every case: each stream, and the upstream corpus (left
// out, or failed under CI, without $AEP_FIXTURES).
func foldCases(t *testing.T) []foldCase {
	t.Helper()
	streams, err := filepath.Glob(filepath.Join("testdata", "streams", "*.jsonl"))
	if err != nil || len(streams) == 0 {
		t.Fatalf("no streams under testdata/streams (%v)", err)
	}
	var out []foldCase
	for _, p := range streams {
		out = append(out, foldCase{strings.TrimSuffix(filepath.Base(p), ".jsonl"), readEvents(t, p)})
	}
	if _, err := fixtures.Dir(); err != nil && os.Getenv("CI") == "" {
		t.Logf("upstream cases skipped: %v", err)
		return out
	}
	dir := fixtures.Require(t)
	var all []*aep.Event
	for _, line := range fixtures.Lines(t, dir, filepath.Join("fixtures", "golden", "golden.jsonl")) {
		ev, err := aep.ParseEvent(line)
		if err != nil {
			t.Fatalf("upstream golden: %v", err)
		}
		all = append(all, ev)
	}
	return append(out, foldCase{upstreamCase, all})
}

func fold(evs []*aep.Event) *Fold {
	f := &Fold{}
	for _, ev := range evs {
		f.Add(ev)
	}
	return f
}

// canonical is a projection as generic JSON, the form both folds are
// compared in.
func canonical(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func indented(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// TestFoldGolden derives every case and compares it to its golden file (run
// with -update to rewrite them; read the diff). Every golden file names a
// case that exists, so a stream removed takes its golden file with it.
func TestFoldGolden(t *testing.T) {
	cases := foldCases(t)
	names := map[string]bool{}
	for _, c := range cases {
		names[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			got := fold(c.events).Projection()
			path := filepath.Join("testdata", "fold", c.name+".json")
			if *update {
				if err := os.WriteFile(path, indented(t, got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			var want any
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if g := canonical(t, got); !reflect.DeepEqual(g, want) {
				t.Errorf("projection differs from %s:\n--- got\n%s--- want\n%s", path, indented(t, g), b)
			}
		})
	}
	goldens, _ := filepath.Glob(filepath.Join("testdata", "fold", "*.json"))
	for _, g := range goldens {
		name := strings.TrimSuffix(filepath.Base(g), ".json")
		if !names[name] && (name != upstreamCase || names[upstreamCase]) {
			t.Errorf("%s names no case", g)
		}
	}
}

// The fold's properties over every case: a duplicate replay changes
// nothing; the arrival order does not matter (but where an emitter put two
// events at one position, which the fold surfaces as a conflict); deriving
// after every event ends where deriving once does; and the projection is
// coherent (open means no outcome, a state matches its marks).
func TestFoldProperties(t *testing.T) {
	for _, c := range foldCases(t) {
		t.Run(c.name, func(t *testing.T) {
			f := fold(c.events)
			want := canonical(t, f.Projection())
			for _, ev := range c.events {
				if f.Add(ev) {
					t.Fatalf("duplicate %s (%s) added", ev.ID, ev.Type)
				}
			}
			if got := canonical(t, f.Projection()); !reflect.DeepEqual(got, want) {
				t.Fatal("a duplicate replay changed the projection")
			}

			step := &Fold{}
			for _, ev := range c.events {
				step.Add(ev)
				if ev.Session != "" {
					step.Session(ev.Session)
				}
			}
			if got := canonical(t, step.Projection()); !reflect.DeepEqual(got, want) {
				t.Fatalf("deriving after every event ends elsewhere:\n%s", indented(t, got))
			}

			stable := map[string]bool{}
			for _, id := range f.Sessions() {
				stable[id] = f.Session(id).Conflicts == 0
			}
			rng := rand.New(rand.NewPCG(1, uint64(len(c.events))))
			for round := range 6 {
				evs := append([]*aep.Event(nil), c.events...)
				if round == 0 {
					for i, j := 0, len(evs)-1; i < j; i, j = i+1, j-1 {
						evs[i], evs[j] = evs[j], evs[i]
					}
				} else {
					rng.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
				}
				got := canonical(t, fold(evs).Projection()).(map[string]any)["sessions"].(map[string]any)
				for id, s := range want.(map[string]any)["sessions"].(map[string]any) {
					if stable[id] && !reflect.DeepEqual(got[id], s) {
						t.Fatalf("arrival order %d changes session %s:\n%s", round, id, indented(t, got[id]))
					}
				}
			}

			for _, id := range f.Sessions() {
				checkCoherent(t, f.Session(id))
			}
		})
	}
}

func checkCoherent(t *testing.T, s *Session) {
	t.Helper()
	open := map[string]bool{}
	for _, r := range s.Open() {
		open[r.ID] = true
	}
	for _, r := range s.Requests {
		st := r.State()
		switch {
		case open[r.ID] != (r.Outcome == nil):
			t.Errorf("%s: open %v with outcome %v", r.ID, open[r.ID], r.Outcome)
		case (st == StateAnswered) != ((r.Answered != nil || r.Rule != "") && r.Outcome == nil):
			t.Errorf("%s: state %s, answered %v, outcome %v", r.ID, st, r.Answered, r.Outcome)
		case r.Answered != nil && r.Answered.Event == "":
			t.Errorf("%s: answered by no event", r.ID)
		case s.Ended != "" && r.Outcome == nil:
			t.Errorf("%s: open in a session that ended", r.ID)
		}
	}
}

// The fold derives per session in (epoch, seq) order whatever the arrival
// order; a new chapter (session.started after an end) lives again; a
// request its session ended on stays closed; deduplication is on (source,
// id), so one id from two emitters is two events.
func TestFoldOrderChaptersAndDedupe(t *testing.T) {
	now := time.Now()
	seq := int64(0)
	ev := func(typ, subject string, data string) *aep.Event {
		e := &aep.Event{AEP: "0.1", ID: aep.NewID(), Type: typ, Subject: subject, Time: aep.FormatTime(now),
			Source: "aep://h/agent/kimi-code/session/s", Agent: "kimi-code", Session: "s",
			Seq: aep.Int64(seq), Epoch: aep.Int64(0), Data: json.RawMessage(data)}
		seq++
		return e
	}
	gate := `{"kind":"permission","prompt":"p","options":[{"id":"allow"},{"id":"deny"}]}`
	started := ev("session.started", "", `{"label":"first"}`)
	old := ev("attention.requested", "Bash", gate)
	ended := ev("session.ended", "", `{"reason":"normal"}`)
	resumed := ev("session.started", "", `{"label":"resumed","trigger":"resume"}`)
	fresh := ev("attention.requested", "Bash", gate)
	// A new epoch restarts seq: it still comes after everything in epoch 0.
	seq = 0
	late := ev("attention.answered", old.ID, `{"answer":{"option":"allow"}}`)
	late.Epoch = aep.Int64(1)
	f := fold([]*aep.Event{late, fresh, resumed, fresh, ended, old, started, old})
	got := f.Pending(now)
	s := f.Session("s")
	if len(got) != 1 || got[0].ID != fresh.ID || s.Title != "resumed" || s.Ended != "" {
		t.Fatalf("pending %v, title %q, ended %q", got, s.Title, s.Ended)
	}
	if r := s.Request(old.ID); r.State() != StateSessionEnded || r.Answered != nil || r.Closed(now) != "session ended" {
		t.Fatalf("the request open at session.ended: %s, answered %v", r.State(), r.Answered)
	}

	twin := *started
	twin.Source = "aep://other/agent/kimi-code/session/s"
	if !f.Add(&twin) || f.Add(&twin) || f.Session("s").Conflicts != 1 {
		t.Fatalf("one id from another emitter: conflicts %d", f.Session("s").Conflicts)
	}
}

// The attention lifecycle of AEP-0002 §7: an answer is not the end (the
// emitter resolves it); the first terminal holds; lifecycle events name
// their request in subject, never through cause alone; types outside the
// registry close nothing.
func TestFoldAttentionLifecycle(t *testing.T) {
	seq := int64(0)
	ev := func(typ, subject, cause, data string) *aep.Event {
		e := &aep.Event{AEP: "0.1", ID: aep.NewID(), Type: typ, Subject: subject, Cause: cause,
			Time: "2026-07-03T10:13:00.000Z", Source: "aep://h/agent/a/session/s", Agent: "a", Session: "s",
			Seq: aep.Int64(seq), Data: json.RawMessage(data)}
		seq++
		return e
	}
	req := ev("attention.requested", "Bash", "", `{"kind":"permission","prompt":"p","expires_at":"2026-07-03T10:14:00Z"}`)
	noSubject := ev("attention.answered", "", req.ID, `{"answer":{"option":"allow"}}`)
	unregistered := ev("attention.cancelled", req.ID, "", `{}`)
	f := fold([]*aep.Event{req, noSubject, unregistered})
	r := f.Session("s").Request(req.ID)
	if r.State() != StatePending {
		t.Fatalf("closed by an event without subject or by an unregistered type: %s", r.State())
	}
	before, after := time.Date(2026, 7, 3, 10, 13, 30, 0, time.UTC), time.Date(2026, 7, 3, 10, 14, 0, 0, time.UTC)
	if r.Status(before) != StatePending || r.Status(after) != StateExpired || r.Closed(after) != "expired" {
		t.Fatalf("deadline: %s before, %s at it", r.Status(before), r.Status(after))
	}
	answered := ev("attention.answered", req.ID, "cmd1", `{"answer":{"option":"deny"},"by":"alice","via":"control"}`)
	f.Add(answered)
	if r = f.Session("s").Request(req.ID); r.State() != StateAnswered || r.Answered.By != "alice" || r.Closed(before) != "answered" {
		t.Fatalf("after the answer: %s %+v", r.State(), r.Answered)
	}
	resolved := ev("attention.resolved", req.ID, answered.ID, `{"resolution":"answered"}`)
	second := ev("attention.timeout", req.ID, "", `{}`)
	f.Add(resolved)
	f.Add(second)
	r = f.Session("s").Request(req.ID)
	if r.State() != StateResolved || r.Outcome.Event != resolved.ID || r.Answer["option"] != "deny" {
		t.Fatalf("after the terminal: %s %+v", r.State(), r.Outcome)
	}
	p := f.Projection().Sessions["s"].Requests[0]
	if p.Outcome.CauseType != "attention.answered" || p.Answered.Cause != "cmd1" || p.Answered.CauseType != "" {
		t.Fatalf("marks: %+v %+v", p.Outcome, p.Answered)
	}
}

// A form's fields as docs/questions.md shows a Kimi question: in order,
// each id once, a select's choices each id once, multi and other read; a
// field without an id, or another kind's fields, are not read.
func TestFoldFormFields(t *testing.T) {
	ev := func(id, data string) *aep.Event {
		return &aep.Event{AEP: "0.1", ID: id, Type: "attention.requested", Subject: "q_1", Time: "2026-07-03T10:13:00.000Z",
			Source: "aep://h/agent/a/session/s", Agent: "a", Session: "s", Seq: aep.Int64(0), Data: json.RawMessage(data)}
	}
	form := ev("F", `{"kind":"form","prompt":"Deploy where? / Notify whom?","fields":[
		{"id":"q_0","type":"select","label":"Deploy where?","other":true,"choices":[{"id":"o1","label":"staging"},{"id":"o2","label":"prod"},{"id":"o1","label":"again"},{"label":"no id"}]},
		{"id":"q_1","type":"select","label":"Notify whom?","multi":true,"required":true,"choices":[{"id":"o3","label":"ops"}]},
		{"id":"q_0","type":"string","label":"q_0 again"},{"type":"string","label":"no id"},"junk"],
		"options":[{"id":"dismiss","label":"Dismiss"}],"respond_via":["control","oob"]}`)
	r := fold([]*aep.Event{form}).Session("s").Request("F")
	want := []Field{
		{ID: "q_0", Type: "select", Label: "Deploy where?", Other: true, Choices: []Option{{ID: "o1", Label: "staging"}, {ID: "o2", Label: "prod"}}},
		{ID: "q_1", Type: "select", Label: "Notify whom?", Multi: true, Required: true, Choices: []Option{{ID: "o3", Label: "ops"}}},
	}
	if !reflect.DeepEqual(r.Fields, want) || !reflect.DeepEqual(r.OptionIDs(), []string{"dismiss"}) {
		t.Fatalf("fields %+v options %v, want %+v and dismiss", r.Fields, r.OptionIDs(), want)
	}
	other := fold([]*aep.Event{ev("P", `{"kind":"permission","fields":[{"id":"x","type":"string","label":"x"}]}`)}).Session("s").Request("P")
	if other.Fields != nil {
		t.Errorf("a permission request's fields read: %+v", other.Fields)
	}
}

func TestProjectionJSON(t *testing.T) {
	f := fold(readEvents(t, streamPath("attention-oob")))
	b, err := json.Marshal(f.Projection())
	if err != nil || !bytes.Contains(b, []byte(`"respond_via":["oob"]`)) {
		t.Fatalf("%s %v", b, err)
	}
}

// FuzzFold folds arbitrary event lines: no panic, a projection that
// marshals, a duplicate replay that changes nothing, and coherent requests.
func FuzzFold(f *testing.F) {
	for _, name := range []string{"attention-lifecycle", "order-dedupe", "attention-oob", "attention-people", "attention-rule"} {
		b, err := os.ReadFile(streamPath(name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var evs []*aep.Event
		for _, line := range bytes.Split(b, []byte("\n")) {
			if ev, err := aep.ParseEvent(line); err == nil {
				evs = append(evs, ev)
			}
		}
		fl := fold(evs)
		want, err := json.Marshal(fl.Projection())
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			fl.Add(ev)
		}
		if got, _ := json.Marshal(fl.Projection()); !bytes.Equal(got, want) {
			t.Fatalf("a duplicate replay changed the projection:\n%s\n%s", want, got)
		}
		for _, id := range fl.Sessions() {
			checkCoherent(t, fl.Session(id))
		}
		fl.Pending(time.Now())
		// The audit of any stream: one row per request with an outcome,
		// every format safe to print (see TestAuditOutputSafe).
		rows := fl.Audit(time.Time{})
		for _, w := range []func(io.Writer, []AuditRow) error{WriteAuditText, WriteAuditJSON, WriteAuditCSV} {
			var out bytes.Buffer
			if err := w(&out, rows); err != nil {
				t.Fatal(err)
			}
			if s := strings.ReplaceAll(out.String(), "\r\n", "\n"); Text(s) != s {
				t.Fatalf("unsafe audit output: %q", s)
			}
		}
	})
}

// BenchmarkFold folds a recorded kimi web session and projects it.
func BenchmarkFold(b *testing.B) {
	evs := readEvents(b, streamPath("capture-web"))
	b.ReportAllocs()
	for b.Loop() {
		f := fold(evs)
		f.Projection()
	}
}

// A request a rule answered never waits on a person, from the rule's
// command on; one whose rule answer the emitter refused waits again, and a
// person's command changes nothing until the emitter answers, even one
// whose agent names a rule (6, 7: only the relay's stamp says a rule
// sent it; 7's answer is ann's).
func TestFoldRuleAnswered(t *testing.T) {
	f := fold(readEvents(t, filepath.Join("testdata", "streams", "attention-rule.jsonl")))
	now, _ := time.Parse(time.RFC3339, "2026-07-03T11:01:00Z")
	var pending []string
	for _, r := range f.Pending(now) {
		pending = append(pending, strings.TrimLeft(strings.TrimPrefix(r.ID, "01JZRULEREQ"), "0"))
	}
	if got := strings.Join(pending, ","); got != "3,4,5,6" {
		t.Fatalf("pending %s, want 3,4,5,6 (1 and 2 were answered by rules, 7 by ann)", got)
	}
	for _, id := range []string{"01JZRULEREQ000000000000006", "01JZRULEREQ000000000000007"} {
		if r := f.Session(f.Sessions()[0]).Request(id); r.Rule != "" {
			t.Errorf("request %s: ruled by %q, from a command whose agent only names the rule", id, r.Rule)
		}
	}
	for _, row := range f.Audit(time.Time{}) {
		if row.Request == "01JZRULEREQ000000000000007" && (row.By != "ann" || row.Surface == SurfaceRule) {
			t.Errorf("the audit of request 7: %+v", row)
		}
	}
	s := f.Session(f.Sessions()[0])
	if r := s.Request("01JZRULEREQ000000000000002"); r.Rule != "rmrf" || r.State() != StateAnswered || r.Ruled.Event != "01JZRULECMD000000000000002" {
		t.Fatalf("request 2: rule %q state %s", r.Rule, r.State())
	}
	if r := s.Request("01JZRULEREQ000000000000003"); r.Rule != "" {
		t.Fatalf("a refused rule answer still marks request 3: %q", r.Rule)
	}
	if _, err := f.Target(s.ID, "01JZRULEREQ000000000000002", now); err == nil {
		t.Fatal("respond may target a request a rule answered")
	}
}

// A request that says what happens at its deadline shows it with the time
// left, in the pending block and through Countdown; one that does not
// keeps the plain time left.
func TestCountdownSaysWhatHappens(t *testing.T) {
	f := fold(readEvents(t, streamPath("attention-gate-expiry")))
	now := time.Date(2026, 7, 3, 10, 14, 0, 0, time.UTC)
	open := f.Pending(now)
	if len(open) != 1 || open[0].Session != "gate-open-3" {
		t.Fatalf("pending %v", open)
	}
	r := open[0]
	if got := r.Countdown(now); got != "denied in 38s" {
		t.Fatalf("Countdown %q", got)
	}
	var b bytes.Buffer
	WritePending(&b, f, r, now, Hints{})
	if !strings.Contains(b.String(), "waiting 10s · denied in 38s · options allow") {
		t.Fatalf("pending block:\n%s", b.String())
	}
	r.OnExpiry = "allow"
	if got := r.Countdown(now); got != "runs anyway in 38s" {
		t.Fatalf("Countdown %q", got)
	}
	r.OnExpiry = ""
	if got := r.Countdown(now); got != "38s left" {
		t.Fatalf("Countdown %q", got)
	}
	r.Deadline = time.Time{}
	if got := r.Countdown(now); got != "no deadline" {
		t.Fatalf("Countdown %q", got)
	}
}

// A reader whose ceiling is metadata still knows a session by its project:
// the relay's down-leveling drops the working directory and the title, and
// keeps the project's name, a metadata member.
func TestProjectSurvivesMetadataCeiling(t *testing.T) {
	ev, err := aep.ParseEvent([]byte(`{"aep":"0.1","id":"01JZCAPROJ0000000000000001","type":"session.started","time":"2026-07-03T10:00:00.000Z",` +
		`"source":"aep://h/agent/kimi-code/session/session_73700a68-b5bf-48db-a79a-430995754527","agent":"kimi-code",` +
		`"session":"session_73700a68-b5bf-48db-a79a-430995754527","seq":0,"epoch":1,"capture":"redacted",` +
		`"data":{"cwd":"~/src/acme-shop","label":"bump chi","x-kimi-code-project":"acme-shop"}}`))
	if err != nil {
		t.Fatal(err)
	}
	low, err := aep.Downlevel(ev, aep.CaptureMetadata)
	if err != nil {
		t.Fatal(err)
	}
	s := fold([]*aep.Event{low}).Session(ev.Session)
	if s.Project != "acme-shop" || s.Cwd != "" || s.Title != "" {
		t.Fatalf("at metadata: project %q, cwd %q, title %q; want the project alone", s.Project, s.Cwd, s.Title)
	}
	if got := fold([]*aep.Event{low}).Labels()[ev.Session].String(); got != "acme-shop · 73700a" {
		t.Errorf("label %q", got)
	}
}
