package consumer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Where a request was sent, in words with how long ago: the page says the
// same (state.js sentWords), both held to testdata/sentwords.json.
func TestSentWords(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "sentwords.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Routed []Route
		Now    time.Time
		Words  string
	}
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		r := &Request{Routed: c.Routed}
		if got := r.SentWords(c.Now); got != c.Words {
			t.Errorf("%+v at %v: %q, want %q", c.Routed, c.Now, got, c.Words)
		}
	}
}
