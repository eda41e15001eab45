package mapping

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
)

// A preview carries the placeholder identity it is given, seq from 0, and
// the payload's session; a bad payload is an error, not a partial preview.
func TestPreview(t *testing.T) {
	p, err := ParsePosture("metadata", "", aep.RedactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	n := 0
	newID := func() string { n++; return aep.NewID() }
	lines, err := Preview([]byte(`{"hook_event_name":"Stop","session_id":"s1"}`), false, Companion, p, "box", now, newID)
	if err != nil || len(lines) == 0 || n != len(lines) {
		t.Fatalf("%d lines, %d ids, %v", len(lines), n, err)
	}
	for i, b := range lines {
		var e aep.Event
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatal(err)
		}
		if e.Session != "s1" || e.Seq == nil || *e.Seq != int64(i) || e.Time != aep.FormatTime(now) || e.Source != aep.SourceURI("box", Agent, "s1") {
			t.Fatalf("event %d: %s", i, b)
		}
	}
	if _, err := Preview([]byte(`not json`), false, Companion, p, "box", now, newID); err == nil {
		t.Fatal("bad payload previewed")
	}
}
