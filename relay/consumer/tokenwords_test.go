package consumer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// tokenWordsCase is one case of testdata/tokenwords.json, which
// fleetpage's state.js is held to as well.
type tokenWordsCase struct {
	Usage   *UsageProjection `json:"usage"`
	Context *struct {
		Tokens int64 `json:"tokens"`
		Limit  int64 `json:"limit"`
	} `json:"context"`
	Words string `json:"words"`
}

func TestTokenWords(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "tokenwords.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []tokenWordsCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		var u Usage
		var ctx Context
		if c.Usage != nil {
			u = Usage{InputTokens: c.Usage.InputTokens, OutputTokens: c.Usage.OutputTokens, Known: true}
		}
		if c.Context != nil {
			ctx = Context{Tokens: c.Context.Tokens, Limit: c.Context.Limit, Known: true}
		}
		if got := TokenWords(u, ctx); got != c.Words {
			t.Errorf("TokenWords(%+v, %+v) = %q, want %q", u, ctx, got, c.Words)
		}
	}
}

// TestTailTokensFit: a turn's end shows the session's figures whole in a
// narrow terminal (the phrase gives up its room), only when they changed,
// and a session that reported none shows nothing.
func TestTailTokensFit(t *testing.T) {
	const width = 72
	var out bytes.Buffer
	p := &Printer{W: &out, Now: func() time.Time { return goldenNow }, Loc: time.UTC, Width: width}
	for _, ev := range readEvents(t, streamPath("tokens")) {
		p.Print(ev)
	}
	for _, ev := range readEvents(t, streamPath("run")) {
		p.Print(ev)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	var shown []string
	for _, l := range lines {
		if w := displayWidth(l); w > width {
			t.Errorf("%d columns: %s", w, l)
		}
		if strings.Contains(l, "context ") && strings.Contains(l, "%") {
			shown = append(shown, l)
		}
	}
	if len(shown) != 2 || !strings.HasSuffix(shown[0], " · 2.8k tokens · context 25%") || !strings.HasSuffix(shown[1], " · 2.9k tokens · context 16%") {
		t.Errorf("rows with token figures:\n%s\nall:\n%s", strings.Join(shown, "\n"), out.String())
	}
	for _, l := range lines {
		if strings.Contains(l, "turn finished") && strings.Contains(l, "tokens") {
			t.Errorf("a session without figures shows some: %s", l)
		}
	}
}
