package mapping

import (
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

func TestParsePosture(t *testing.T) {
	for _, c := range []struct {
		capture, attention string
		want, wantAttn     aep.Capture
		err                bool
	}{
		{"metadata", "", aep.CaptureMetadata, aep.CaptureRedacted, false},
		{"none", "", aep.CaptureNone, aep.CaptureNone, false},
		{"none", "full", aep.CaptureNone, aep.CaptureFull, false},
		{"full", "redacted", aep.CaptureFull, aep.CaptureRedacted, false},
		{"everything", "", 0, 0, true},
		{"metadata", "loud", 0, 0, true},
	} {
		p, err := ParsePosture(c.capture, c.attention, aep.RedactOptions{})
		if (err != nil) != c.err {
			t.Errorf("%q/%q: %v", c.capture, c.attention, err)
			continue
		}
		if err == nil && (p.Capture != c.want || p.AttentionCapture != c.wantAttn || p.Redactor == nil) {
			t.Errorf("%q/%q: %+v", c.capture, c.attention, p)
		}
	}
}
