package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/export"
	"github.com/aep-kimi/aep-kimi/internal/testkit/exporttest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
)

// TestExportOffline runs the offline bridges over the golden corpus through
// the command: CE forward and back is the identity, OCSF skips what §4.2
// does not map, and bad input exits 1 with a line-numbered message.
func TestExportOffline(t *testing.T) {
	goldenPath := filepath.Join(fixtures.Require(t), "fixtures", "golden", "golden.jsonl")
	in, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	runIt := func(stdin []byte, args ...string) (string, string, int) {
		var out, errb bytes.Buffer
		code := run(append([]string{"export"}, args...), stdio{bytes.NewReader(stdin), &out, &errb})
		return out.String(), errb.String(), code
	}
	ce, _, code := runIt(nil, "ce", goldenPath)
	if code != 0 {
		t.Fatalf("export ce: exit %d", code)
	}
	back, stderr, code := runIt([]byte(ce), "ce", "--inverse")
	if code != 0 {
		t.Fatalf("ce --inverse: exit %d (%s)", code, stderr)
	}
	want := strings.Split(strings.TrimSpace(string(in)), "\n")
	got := strings.Split(strings.TrimSpace(back), "\n")
	if len(got) != len(want) {
		t.Fatalf("ce --inverse: %d events, want %d", len(got), len(want))
	}
	for i := range want {
		g, err1 := aep.CanonicalRaw([]byte(got[i]))
		w, err2 := aep.CanonicalRaw([]byte(want[i]))
		if err1 != nil || err2 != nil || !bytes.Equal(g, w) {
			t.Fatalf("line %d changed through ce and back:\n%s\n%s", i+1, got[i], want[i])
		}
	}
	out, stderr, code := runIt(in, "ocsf")
	lines := strings.Count(out, "\n")
	if code != 0 || lines == 0 || !strings.Contains(stderr, "skipped") {
		t.Fatalf("ocsf: exit %d, %d records, %q", code, lines, stderr)
	}
	if _, stderr, code := runIt(in, "otlp", "--max-capture", "bogus"); code != 2 {
		t.Fatalf("bad --max-capture: exit %d (%s)", code, stderr)
	}
	if _, stderr, code := runIt([]byte("{\"aep\":\n"), "otlp"); code != 1 || !strings.Contains(stderr, "-:1:") {
		t.Fatalf("bad input: exit %d (%s)", code, stderr)
	}
	for _, args := range [][]string{
		{"ocsf", "--relay", "http://127.0.0.1:1"},                        // neither --out nor --sink
		{"otlp", "--relay", "http://127.0.0.1:1", "--signal", "metrics"}, // unknown signal
		{"otlp", "--endpoint", "http://127.0.0.1:1"},                     // live flag without --relay
		{"ce", "--relay", "http://127.0.0.1:1", "--inverse", "--sink", "http://x"},
	} {
		if _, stderr, code := runIt(nil, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr)
		}
	}
	if _, _, code := runIt(nil, "nonsense"); code != 2 {
		t.Fatalf("unknown mode: exit %d", code)
	}
}

// TestUpOTLP runs up with --otlp against a real OTLP/HTTP receiver: a run
// posted to up's relay arrives as log records and as an invoke_agent span
// with its execute_tool child.
func TestUpOTLP(t *testing.T) {
	rcv := exporttest.NewReceiver(0)
	defer rcv.Close()
	o, getenv := upFixture(t)
	o.otlp = export.UpOTLP{Endpoint: rcv.URL, Signal: "both", MaxCapture: "metadata"}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out syncbuf.Buffer
	go func() { done <- upRun(ctx, o, getenv, stdio{in: strings.NewReader(""), out: &out, err: &out}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("up: %v\n%s", err, out.String())
		}
	}()
	at := time.Date(2026, 7, 3, 10, 0, 0, 0, time.UTC)
	mk := func(seq int64, typ, subject, data string) *aep.Event {
		e := &aep.Event{AEP: aep.Version, ID: aep.NewID(), Type: typ, Subject: subject,
			Time: aep.FormatTime(at.Add(time.Duration(seq) * time.Second)), Source: "aep://t/agent/kimi-code/session/u1",
			Agent: "kimi-code", Session: "u1", Run: "r1", Seq: aep.Int64(seq), Epoch: aep.Int64(0)}
		if data != "" {
			e.Data = []byte(data)
		}
		return e
	}
	base := "http://" + o.RelayListen
	if !poll.Until(30*time.Second, func() bool { return proctest.Answers(base + "/healthz") }) {
		t.Fatalf("the relay never answered\n%s", out.String())
	}
	relaycall.Post(t, base, "up-test-token",
		mk(0, "run.started", "", ""),
		mk(1, "tool.requested", "Shell", `{"tool":{"name":"Shell","call_id":"x1"}}`),
		mk(2, "tool.completed", "Shell", `{"tool":{"name":"Shell","call_id":"x1"}}`),
		mk(3, "run.finished", "", ""))
	if !poll.Until(30*time.Second, func() bool { return len(rcv.Spans()) >= 2 && len(rcv.Logs()) >= 4 }) {
		t.Fatalf("receiver got %d spans, %d logs\n%s", len(rcv.Spans()), len(rcv.Logs()), out.String())
	}
	var run, tool bool
	for _, sp := range rcv.Spans() {
		run = run || sp.Name == "invoke_agent kimi-code" && sp.EndTimeUnixNano-sp.StartTimeUnixNano == uint64(3*time.Second)
		tool = tool || sp.Name == "execute_tool Shell"
	}
	if !run || !tool {
		t.Errorf("spans %v", rcv.Spans())
	}
}
