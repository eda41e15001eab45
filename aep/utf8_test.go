package aep_test

import (
	"errors"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Two sessions whose names differ only in bytes that are not UTF-8 (or in
// unpaired surrogate escapes) would decode to the same U+FFFD name: the
// parser refuses them rather than merge them.
func TestParseEventRefusesLossyText(t *testing.T) {
	t.Parallel()
	const head = `{"specversion":"0.1","id":"e1","source":"urn:x","type":"run.started","time":"2026-01-01T00:00:00Z","session":`
	cases := []struct {
		name, event string
		refused     bool
	}{
		{"plain", head + `"s1","data":{}}`, false},
		{"non-ascii", head + `"sé☃","data":{}}`, false},
		{"escaped pair", head + `"\ud83d\ude00","data":{}}`, false},
		{"escaped bmp", head + `"\u00e9\ufffd","data":{}}`, false},
		{"escaped backslash-u text", head + `"\\ud800","data":{}}`, false},
		{"raw invalid byte in session", head + "\"s\xff\",\"data\":{}}", true},
		{"raw invalid byte in data", head + "\"s\",\"data\":{\"x\":\"\xc3\"}}", true},
		{"lone high surrogate", head + `"a\ud800","data":{}}`, true},
		{"lone low surrogate", head + `"a\udc00b","data":{}}`, true},
		{"high then non-low", head + `"\ud800\u0041","data":{}}`, true},
		{"high at end", head + `"\ud83d","data":{}}`, true},
		{"surrogate in data is forwarded", head + `"s","data":{"x":"\ud800"}}`, false},
	}
	for _, c := range cases {
		_, err := aep.ParseEvent([]byte(c.event))
		if got := errors.Is(err, aep.ErrNotUTF8); got != c.refused {
			t.Errorf("%s: err %v, refused %v, want %v", c.name, err, got, c.refused)
		}
		if !c.refused && err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
