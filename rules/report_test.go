package rules

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// A rule the relay hid from a reader below the redacted ceiling is listed
// as hidden, not as "*" (which would read as "any arguments, every
// project"), and is not warned about as a wildcard it may not be.
func TestWriteListHidden(t *testing.T) {
	var b bytes.Buffer
	l := Listing{Status: Status{OK: true}, Rules: []Listed{
		{Rule: Rule{ID: "r-hid", Effect: Allow, Tool: "Bash"}, Hidden: true},
		{Rule: Rule{ID: "r-any", Effect: Allow, Tool: "Bash"}},
	}}
	WriteList(&b, l, time.Now())
	out := b.String()
	hid, anyLine := lineWith(out, "r-hid"), lineWith(out, "r-any")
	if strings.Count(hid, "(hidden)") != 2 || strings.Contains(anyLine, "(hidden)") {
		t.Errorf("listing:\n%s", out)
	}
	if strings.Contains(out, "r-hid's wildcard") || !strings.Contains(out, "r-any's wildcard") {
		t.Errorf("warnings:\n%s", out)
	}
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
