package stacktest

import (
	"bufio"
	"encoding/json"
	"os"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
)

// RecordedHooks reads a hook capture the adapter's tests keep (a real
// Kimi session): each hook's name and payload, in arrival order.
func RecordedHooks(t *testing.T, name string) (events, payloads []string) {
	t.Helper()
	f, err := os.Open(fixtures.InModule(t, "adapter", "testdata", "captures", name+".hooks.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		var c struct{ Event, Raw string }
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		events, payloads = append(events, c.Event), append(payloads, c.Raw)
	}
	return events, payloads
}
