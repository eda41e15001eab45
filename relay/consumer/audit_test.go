package consumer

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

// auditFormats are the audit's writers, by the golden file's extension.
var auditFormats = map[string]func(*bytes.Buffer, []AuditRow) error{
	"txt":  func(b *bytes.Buffer, r []AuditRow) error { return WriteAuditText(b, r) },
	"json": func(b *bytes.Buffer, r []AuditRow) error { return WriteAuditJSON(b, r) },
	"csv":  func(b *bytes.Buffer, r []AuditRow) error { return WriteAuditCSV(b, r) },
}

// auditCases are the recorded streams with attention requests: the fold's
// (testdata/streams) and the audit's own (testdata/audit/*.jsonl: people
// stamped on commands by a relay, every surface, hostile text).
func auditCases(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, glob := range []string{filepath.Join("testdata", "streams", "*.jsonl"), filepath.Join("testdata", "audit", "*.jsonl")} {
		paths, _ := filepath.Glob(glob)
		for _, p := range paths {
			out[strings.TrimSuffix(filepath.Base(p), ".jsonl")] = p
		}
	}
	if len(out) == 0 {
		t.Fatal("no streams")
	}
	return out
}

// TestAuditGolden pins each output format of every recorded stream that
// has an outcome: testdata/audit/NAME.audit.{txt,json,csv} (run with
// -update to rewrite them; read the diff). A golden file without its
// stream fails.
func TestAuditGolden(t *testing.T) {
	cases := auditCases(t)
	kept := map[string]bool{}
	for name, path := range cases {
		rows := fold(readEvents(t, path)).Audit(time.Time{})
		if len(rows) == 0 {
			continue
		}
		for ext, write := range auditFormats {
			golden := filepath.Join("testdata", "audit", name+".audit."+ext)
			kept[golden] = true
			t.Run(name+"/"+ext, func(t *testing.T) {
				var out bytes.Buffer
				if err := write(&out, rows); err != nil {
					t.Fatal(err)
				}
				textGolden(t, golden, out.String())
			})
		}
	}
	goldens, _ := filepath.Glob(filepath.Join("testdata", "audit", "*.audit.*"))
	for _, g := range goldens {
		if !kept[g] {
			t.Errorf("%s names no stream with outcomes", g)
		}
	}
}

// What the audit says about the people stream, field by field: the
// person the relay stamped on each command, the surface its agent names,
// rules by id, nobody for timeouts and for what the session's end closed.
func TestAuditPeople(t *testing.T) {
	rows := fold(readEvents(t, filepath.Join("testdata", "audit", "people.jsonl"))).Audit(time.Time{})
	type brief struct{ tool, outcome, by, surface string }
	var got []brief
	for _, r := range rows {
		got = append(got, brief{r.Tool, r.Outcome, r.By, r.Surface})
	}
	want := []brief{
		{"Bash", OutcomeAllowed, "alice", SurfacePage},
		{"Bash", OutcomeDenied, "r3", SurfaceRule},
		{"Bash", OutcomeDenied, "bob", SurfaceCLI},
		{"Bash", OutcomeAllowedSession, "carol", SurfacePush},
		{"Bash", OutcomeCancelled, "dave", SurfaceLink},
		{"Bash", OutcomeDenied, Nobody, SurfaceTimeout},
		{"Bash", OutcomeProceeded, Nobody, SurfaceTimeout},
		{"Bash", OutcomeDenied, "@mallory\x1b[2K", SurfacePage},
		{"Bash", OutcomeAllowed, "", SurfacePage},
		{"Write", OutcomeAllowed, "ops-bot", ""},
		{"Bash", OutcomeSessionEnded, Nobody, ""},
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if rows[0].LatencyMS != 4200 || rows[0].Summary != "git push origin main" || rows[5].LatencyMS != 48000 {
		t.Errorf("latency or summary: %+v / %+v", rows[0], rows[5])
	}
	// --since: the outcomes recorded at 09:05 and later.
	since := fold(readEvents(t, filepath.Join("testdata", "audit", "people.jsonl"))).Audit(time.Date(2026, 7, 4, 9, 5, 0, 0, time.UTC))
	if len(since) != 7 || since[0].Surface != SurfaceLink {
		t.Errorf("since 09:05: %d rows, first %+v", len(since), since[0])
	}
}

// Every format's output is safe whatever the events say: no control or
// bidi character raw in any of them, the JSON one valid object per line,
// the CSV parseable back with every record whole and no cell a spreadsheet
// would run as a formula.
func TestAuditOutputSafe(t *testing.T) {
	for name, path := range auditCases(t) {
		rows := fold(readEvents(t, path)).Audit(time.Time{})
		for ext, write := range auditFormats {
			var out bytes.Buffer
			if err := write(&out, rows); err != nil {
				t.Fatal(err)
			}
			s := out.String()
			if ext == "csv" {
				s = strings.ReplaceAll(s, "\r\n", "\n")
			}
			if Text(s) != s {
				t.Errorf("%s %s: unsafe characters in %q", name, ext, s)
			}
		}
		var js bytes.Buffer
		if err := WriteAuditJSON(&js, rows); err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(&js)
		for i := range rows {
			var r AuditRow
			if err := dec.Decode(&r); err != nil {
				t.Fatalf("%s: JSON row %d: %v", name, i, err)
			}
		}
		var c bytes.Buffer
		if err := WriteAuditCSV(&c, rows); err != nil {
			t.Fatal(err)
		}
		if len(rows) > 0 && !bytes.HasSuffix(c.Bytes(), []byte("\r\n")) {
			t.Errorf("%s: CSV records do not end in CRLF", name)
		}
		recs, err := csv.NewReader(&c).ReadAll()
		if err != nil || len(recs) != len(rows)+1 {
			t.Fatalf("%s: CSV: %d records, %v", name, len(recs), err)
		}
		for _, rec := range recs {
			if len(rec) != len(AuditColumns) {
				t.Errorf("%s: record of %d cells", name, len(rec))
			}
			for _, cell := range rec {
				if cell != "" && strings.ContainsRune("=+-@\t\r", rune(cell[0])) {
					t.Errorf("%s: cell %q would run as a formula", name, cell)
				}
			}
		}
	}
}

func TestDefuseCell(t *testing.T) {
	for in, want := range map[string]string{
		"": "", "ok": "ok", "=1+1": "'=1+1", "+1": "'+1", "-1": "'-1", "@SUM(A1)": "'@SUM(A1)",
		"\tx": "'\tx", "a=b": "a=b", "'=x": "'=x",
	} {
		if got := DefuseCell(in); got != want {
			t.Errorf("DefuseCell(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 7, 4, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"90m":                  now.Add(-90 * time.Minute),
		"24h":                  now.Add(-24 * time.Hour),
		"7d":                   now.Add(-7 * 24 * time.Hour),
		"0s":                   now,
		"2026-07-01":           time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC),
		"2026-07-01T10:00:00Z": time.Date(2026, 7, 1, 10, 0, 0, 0, time.UTC),
	} {
		got, err := ParseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "-5m", "7", "d", "99999d", "2026-13-01", "\x1b[2Kx"} {
		_, err := ParseSince(bad, now)
		if err == nil {
			t.Errorf("ParseSince(%q) accepted", bad)
			continue
		}
		if Line(err.Error()) != err.Error() {
			t.Errorf("ParseSince(%q): error carries control characters: %q", bad, err)
		}
	}
}

// FuzzParseSince: any input is a time or an error, never a panic, and an
// error quotes the input only escaped.
func FuzzParseSince(f *testing.F) {
	for _, s := range []string{"24h", "7d", "2026-07-01", "2026-07-01T10:00:00.5+02:00", "-1h", "1e9h", "\x00d"} {
		f.Add(s)
	}
	now := time.Date(2026, 7, 4, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseSince(s, now)
		if err != nil {
			if Line(err.Error()) != err.Error() {
				t.Fatalf("error carries control characters: %q", err)
			}
			return
		}
		if got.IsZero() {
			t.Fatalf("%q: zero time without an error", s)
		}
	})
}

// The agents of aep-kimi's own senders name the surfaces mapping knows.
func TestSurfaceAgents(t *testing.T) {
	for agent, want := range map[string]string{mapping.AgentPage: SurfacePage, client.SenderAgent: SurfaceCLI, mapping.AgentPush: SurfacePush, mapping.AgentLink: SurfaceLink} {
		if got, ok := mapping.SurfaceOf(agent); !ok || got != want {
			t.Errorf("SurfaceOf(%q) = %q %v, want %q", agent, got, ok, want)
		}
	}
}

// Each outcome in one line, the words the page's trace and a notification's
// follow-up say (state.js settledWords, held to the same list).
func TestAuditWords(t *testing.T) {
	f := fold(readEvents(t, filepath.Join("testdata", "audit", "people.jsonl")))
	s := f.Session(f.Sessions()[0])
	var got []string
	for _, r := range s.Requests {
		if row, ok := s.Settlement(r); ok {
			got = append(got, row.Words())
		}
	}
	want := []string{
		"allowed by alice from the page",
		"denied by rule r3",
		"denied by bob from the terminal",
		"allowed for the session by carol from a phone",
		"cancelled by dave through an answer link",
		"denied: nobody answered",
		"proceeded: nobody answered",
		"denied by @mallory\x1b[2K from the page",
		"allowed from the page",
		"allowed by ops-bot",
		"closed: the session ended first",
	}
	if !slices.Equal(got, want) {
		t.Errorf("words:\n got %q\nwant %q", got, want)
	}
}
