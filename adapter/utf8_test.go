package adapter

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/spool"
)

// A payload that is not UTF-8 is refused on the spool path as on /hook:
// quarantined (kept, counted), never read as U+FFFD into a merged session.
func TestSpooledInvalidUTF8Quarantined(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dir := spool.Dir(home)
	bad := []byte("{\"hook_event_name\":\"SessionStart\",\"session_id\":\"u\xff\",\"source\":\"startup\"}")
	if _, _, err := spool.Append(dir, spool.Header{Delivery: "utf8-bad", At: time.Now().UTC().Format(time.RFC3339Nano), Reason: "rejected"}, bad); err != nil {
		t.Fatal(err)
	}
	s := newTestServer(t, home, nil)
	if _, _, err := s.ingest(&delivery{payload: bad, at: time.Now()}, false); !errors.Is(err, errNotUTF8) {
		t.Fatalf("direct ingest: %v, want errNotUTF8", err)
	}
	if n := s.ingestSpool(0); n != 0 {
		t.Fatalf("%d spooled records ingested", n)
	}
	q, _ := spool.ListQuarantine(dir)
	if len(q) != 1 || !strings.Contains(q[0].Reason, "UTF-8") {
		t.Fatalf("quarantine holds %+v, want one record with its UTF-8 reason", q)
	}
	if ids := s.SessionIDs(); len(ids) != 0 {
		t.Fatalf("sessions created from invalid UTF-8: %q", ids)
	}
}
