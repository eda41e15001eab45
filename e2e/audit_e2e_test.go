// Audit end to end: who answered each held call, from the real gate and
// relay, on both stores and after a kill -9; only the built binaries show
// the whole record a person reads.

package e2e

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// A real Kimi session through the real relay and gate: a rule denies
// `rm -rf ./build`, a person allows `echo person` from the terminal, and
// nobody answers `echo late`, which runs anyway at the gate's deadline.
// audit lists the three outcomes, in order, in every format, from the
// relay's replay and from the adapter's session logs alike.
func TestE2EAuditListsWhoAnswered(t *testing.T) {
	// Serial: it holds recorded answer latencies to a window of a few hundred ms, which tests running beside it would stretch.
	kimi := kimiharness.Require(t)
	st := stacktest.StartStack(t, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=6000")
	rule := st.AddRule(t, "deny", "--tool", "Bash", "--args", "rm -rf *", "--note", "never force-remove")

	script := stacktest.BashSteps(t, "rm -rf ./build", "echo person", "echo late")
	done := stacktest.Async(t, func() kimiharness.PrintRun { return stacktest.Scenario(t, kimi, script, st.HookCmd(t)) })

	out := st.WaitCLI(t, func(s string) bool { return strings.Contains(s, "echo person") }, "pending")
	m := regexp.MustCompile(`aep-kimi respond --option deny (\S+) (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no answering command in pending:\n%s", out)
	}
	if code, msg := st.Cli(t, "respond", "--option", "allow", m[1], m[2]); code != 0 {
		t.Fatalf("respond: exit %d: %s", code, msg)
	}
	<-done
	st.WaitQuiet(t)

	type want struct{ summary, outcome, by, surface string }
	wants := []want{
		{"rm -rf ./build", consumer.OutcomeDenied, rule, consumer.SurfaceRule},
		{"echo person", consumer.OutcomeAllowed, access.OwnerName, consumer.SurfaceCLI},
		{"echo late", consumer.OutcomeProceeded, consumer.Nobody, consumer.SurfaceTimeout},
	}
	check := func(source string, rows []consumer.AuditRow) {
		t.Helper()
		if len(rows) != len(wants) {
			t.Fatalf("%s: %d rows, want %d: %+v", source, len(rows), len(wants), rows)
		}
		for i, w := range wants {
			r := rows[i]
			got := want{r.Summary, r.Outcome, r.By, r.Surface}
			// pending names the session by its short id; the audit's rows by the whole.
			if got != w || r.Tool != "Bash" || !strings.HasPrefix(consumer.BareID(r.Session), m[1]) || len(r.Session) <= len(m[1]) {
				t.Errorf("%s row %d: %+v, want %+v in session %s", source, i+1, r, w, m[1])
			}
		}
		if l := rows[2].LatencyMS; l < 4000 || l > 7000 {
			t.Errorf("%s: the timed-out request waited %d ms, want about the gate's 6 s", source, l)
		}
	}
	for _, src := range [][]string{nil, {"--logs", filepath.Join(st.Home, "logs")}} {
		name := "relay"
		if src != nil {
			name = "logs"
		}
		code, js := st.Cli(t, append([]string{"audit", "--json"}, src...)...)
		if code != 0 {
			t.Fatalf("audit --json (%s): exit %d: %s", name, code, js)
		}
		var rows []consumer.AuditRow
		dec := json.NewDecoder(strings.NewReader(js))
		for dec.More() {
			var r consumer.AuditRow
			if err := dec.Decode(&r); err != nil {
				t.Fatalf("audit --json (%s): %v:\n%s", name, err, js)
			}
			rows = append(rows, r)
		}
		check(name+" json", rows)
		// The latency the emitter measured is the wait the record's own
		// times show.
		for _, r := range rows {
			asked, err1 := time.Parse(time.RFC3339Nano, r.Requested)
			decided, err2 := time.Parse(time.RFC3339Nano, r.Time)
			if d := decided.Sub(asked).Milliseconds() - r.LatencyMS; err1 != nil || err2 != nil || d < -250 || d > 250 {
				t.Errorf("%s: %s waited %d ms by the emitter's measure, %s to %s by its times", name, r.Summary, r.LatencyMS, r.Requested, r.Time)
			}
		}

		code, text := st.Cli(t, append([]string{"audit", "--csv"}, src...)...)
		recs, err := csv.NewReader(strings.NewReader(text)).ReadAll()
		if code != 0 || err != nil || len(recs) == 0 {
			t.Fatalf("audit --csv (%s): exit %d %v:\n%s", name, code, err, text)
		}
		col := map[string]int{}
		for i, h := range recs[0] {
			col[h] = i
		}
		rows = nil
		for _, rec := range recs[1:] {
			rows = append(rows, consumer.AuditRow{Session: rec[col["session"]], Tool: rec[col["tool"]], Summary: rec[col["summary"]],
				Outcome: rec[col["outcome"]], By: rec[col["by"]], Surface: rec[col["surface"]], LatencyMS: stacktest.Atoi(t, rec[col["latency_ms"]])})
		}
		check(name+" csv", rows)

		code, text = st.Cli(t, append([]string{"audit"}, src...)...)
		t.Logf("aep-kimi audit (%s):\n%s", name, text)
		lines := strings.Split(strings.TrimSpace(text), "\n")
		if code != 0 || len(lines) != 4 {
			t.Fatalf("audit (%s): exit %d:\n%s", name, code, text)
		}
		for i, w := range []*regexp.Regexp{
			regexp.MustCompile(`Bash: rm -rf \./build\s+denied\s+rule ` + rule + `\s+rule\s`),
			regexp.MustCompile(`Bash: echo person\s+allowed\s+owner\s+cli\s`),
			regexp.MustCompile(`Bash: echo late\s+proceeded\s+nobody\s+timeout\s`),
		} {
			if !w.MatchString(lines[i+1]) {
				t.Errorf("audit (%s) line %d: %q does not match %s", name, i+2, lines[i+1], w)
			}
		}
	}
}

// With the JetStream store, audit reads everything the relay ever
// admitted: killed -9 and restarted, the real relay lists the same
// outcomes as the session log they were posted from.
func TestE2EAuditJetStreamAfterKill(t *testing.T) {
	t.Parallel()
	stacktest.Binaries(t)
	lines, err := os.ReadFile(stacktest.AuditStream(t) + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var emitted [][]byte
	for _, l := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
		if !bytes.Contains(l, []byte(`"type": "control.attention.respond"`)) { // commands flow only on sockets
			emitted = append(emitted, l)
		}
	}
	logs := t.TempDir()
	if err := os.WriteFile(filepath.Join(logs, "people.jsonl"), append(bytes.Join(emitted, []byte("\n")), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	st := stacktest.NewStack(t, "AEP_STORE=jetstream")
	relaycall.PostLines(t, st.RelayURL, st.Token, emitted...)
	st.Relay.Kill()
	port := strings.TrimPrefix(st.RelayURL, "http://")
	st.Relay = stacktest.StartDaemon(t, st.RelayURL, []string{"AEP_TOKEN=" + st.Token, "AEP_HOME=" + st.Home, "AEP_STORE=jetstream"}, "relay", "--listen", port)

	_, fromLogs := st.Cli(t, "audit", "--json", "--logs", logs)
	code, fromRelay := st.Cli(t, "audit", "--json")
	if code != 0 || fromRelay != fromLogs || strings.Count(fromRelay, "\n") != 11 {
		t.Fatalf("audit after kill -9: exit %d\n--- relay\n%s--- logs\n%s", code, fromRelay, fromLogs)
	}
}
