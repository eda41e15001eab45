package export

import (
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	logspb "go.opentelemetry.io/proto/otlp/logs/v1"
	"google.golang.org/protobuf/proto"
)

// labelled is a session whose start says its title and working directory
// at capture redacted, and a run of it at capture run.
func labelled(run string) []*aep.Event {
	const sid = "session_73700a68-b5bf-48db-a79a-430995754527"
	start := ev(sid, "", 0, "session.started", "", `{"label":"bump chi","cwd":"/home/u/acme-shop"}`)
	start.Capture = "redacted"
	evs := []*aep.Event{start,
		ev(sid, "r1", 1, "run.started", "", `{"trigger":"user"}`),
		ev(sid, "r1", 2, "run.finished", "", ``)}
	for _, e := range evs[1:] {
		e.Capture = run
	}
	return evs
}

// TestTracerSessionLabel: the run span names its session as people know
// it, with the project and title only when the ceiling lets the start's
// payload out and the run's own capture is as high.
func TestTracerSessionLabel(t *testing.T) {
	for _, tc := range []struct {
		name string
		max  aep.Capture
		run  string
		want string
	}{
		{"under the ceiling", aep.CaptureRedacted, "redacted", "acme-shop · bump chi · 73700a"},
		{"start above the ceiling", aep.CaptureMetadata, "metadata", "73700a"},
		{"run captured lower", aep.CaptureFull, "metadata", "73700a"},
	} {
		tr := Tracer{MaxCapture: tc.max}
		var got any
		for _, sp := range spansOf(tr.Add(labelled(tc.run))) {
			if a := kvMap(sp.Attributes); a["aep.run_id"] == "r1" {
				got = a[AttrSessionLabel]
			}
		}
		if got != tc.want {
			t.Errorf("%s: %s = %v, want %q", tc.name, AttrSessionLabel, got, tc.want)
		}
	}
}

// TestLogsSessionLabel: every log record of a session carries its label,
// the start's title and project only on records captured as high.
func TestLogsSessionLabel(t *testing.T) {
	s := &OTLPSink{Endpoint: "http://127.0.0.1:1", Signal: SignalLogs, MaxCapture: aep.CaptureRedacted}
	d, _, err := s.Prepare(labelled("metadata"))
	if err != nil {
		t.Fatal(err)
	}
	parts := d.(*otlpDelivery).parts
	if len(parts) != 1 {
		t.Fatalf("%d parts, want the logs", len(parts))
	}
	var ld logspb.LogsData
	if err := proto.Unmarshal(parts[0].body, &ld); err != nil {
		t.Fatal(err)
	}
	var got []any
	for _, rl := range ld.ResourceLogs {
		for _, sl := range rl.ScopeLogs {
			for _, lr := range sl.LogRecords {
				got = append(got, kvMap(lr.Attributes)[AttrSessionLabel])
			}
		}
	}
	want := []any{"acme-shop · bump chi · 73700a", "73700a", "73700a"}
	if len(got) != len(want) {
		t.Fatalf("labels %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d: label %v, want %v", i, got[i], want[i])
		}
	}
}

// TestTracerProjectAtMetadata: a start at the default capture names its
// project (mapping.DataProject, a metadata member), so a run span exported
// under a metadata ceiling is labelled by it, never by its title.
func TestTracerProjectAtMetadata(t *testing.T) {
	const sid = "session_73700a68-b5bf-48db-a79a-430995754527"
	start := ev(sid, "", 0, "session.started", "", `{"x-kimi-code-project":"acme-shop"}`)
	start.Capture = "metadata"
	evs := []*aep.Event{start, ev(sid, "r1", 1, "run.started", "", `{"trigger":"user"}`), ev(sid, "r1", 2, "run.finished", "", ``)}
	for _, e := range evs[1:] {
		e.Capture = "metadata"
	}
	tr := Tracer{MaxCapture: aep.CaptureMetadata}
	var got any
	for _, sp := range spansOf(tr.Add(evs)) {
		if a := kvMap(sp.Attributes); a["aep.run_id"] == "r1" {
			got = a[AttrSessionLabel]
		}
	}
	if want := "acme-shop · 73700a"; got != want {
		t.Errorf("%s = %v, want %q", AttrSessionLabel, got, want)
	}
}
