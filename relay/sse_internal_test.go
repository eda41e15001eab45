package relay

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// deadlineRecorder is a response writer that records the write deadlines
// set on it.
type deadlineRecorder struct {
	*httptest.ResponseRecorder
	deadlines []time.Time
}

func (r *deadlineRecorder) SetWriteDeadline(t time.Time) error {
	r.deadlines = append(r.deadlines, t)
	return nil
}

// A stream's writes each start with at least the write timeout before the
// deadline (and at most a quarter more), yet a busy stream does not re-arm
// the deadline before every write: at 10,000 events/s to 100 streams that
// was a timer update per write on the writers' path.
func TestDeadlineWriterRearmsOnlyWhenDue(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	rec := &deadlineRecorder{ResponseRecorder: httptest.NewRecorder()}
	d := &deadlineWriter{w: rec, rc: http.NewResponseController(rec), timeout: timeout}
	start := time.Now()
	n := 0
	for ; time.Since(start) < timeout; n++ {
		before := time.Now()
		if _, err := d.Write([]byte("data: x\n\n")); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		if len(rec.deadlines) == 0 {
			t.Fatal("no write deadline set")
		}
		dl := rec.deadlines[len(rec.deadlines)-1]
		if left := dl.Sub(before); left < timeout {
			t.Fatalf("write %d started %v before its deadline; want at least %v", n, left, timeout)
		}
		if left := dl.Sub(after); left > timeout+timeout/deadlineSlack {
			t.Fatalf("write %d ended %v before its deadline; want at most %v", n, left, timeout+timeout/deadlineSlack)
		}
	}
	if n < 100 {
		t.Skipf("only %d writes in %v: too few to tell", n, timeout)
	}
	// Over one timeout the deadline needs re-arming about four times
	// (every quarter of it); once per write it was n times.
	if len(rec.deadlines) > 8 {
		t.Fatalf("%d writes re-armed the deadline %d times; want it re-armed only when less than the timeout is left", n, len(rec.deadlines))
	}
}
