package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/fixtures"
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
	if _, _, code := runIt(nil, "nonsense"); code != 2 {
		t.Fatalf("unknown mode: exit %d", code)
	}
}
