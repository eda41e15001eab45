package consumer

import (
	"github.com/aep-kimi/aep-kimi/aep"
	"math"
	"strconv"
	"strings"
)

// TokenWords says a session's token figures in a few words: the tokens
// used and how full its context is ("12.3k tokens · context 41%"), each
// only when known; "" when neither is. fleetpage's state.js tokenWords
// says the same, both held to testdata/tokenwords.json.
func TokenWords(u Usage, c Context) string {
	var parts []string
	if u.Known {
		parts = append(parts, CompactCount(u.InputTokens+u.OutputTokens)+" tokens")
	}
	if f, ok := c.Fill(); ok {
		parts = append(parts, "context "+strconv.FormatFloat(math.Round(f*100), 'f', 0, 64)+"%")
	} else if c.Known {
		parts = append(parts, "context "+CompactCount(c.Tokens)+" tokens")
	}
	return strings.Join(parts, labelSep)
}

// CompactCount writes a count in at most a few characters: 950, 12.3k,
// 1.2M, rounding half up in integers so that the page's JavaScript, which
// does the same, prints the same.
func CompactCount(n int64) string {
	tenths := func(unit int64) string {
		t := (n + unit/20) / (unit / 10)
		return strconv.FormatInt(t/10, 10) + "." + strconv.FormatInt(t%10, 10)
	}
	switch {
	case n < 1000:
		return strconv.FormatInt(n, 10)
	case n < 999_950:
		return tenths(1000) + "k"
	default:
		return tenths(1_000_000) + "M"
	}
}

// showsTokens says whether a row of this type shows its session's token
// figures: the rows where they settle, a turn's end and a compaction.
func showsTokens(typ string) bool {
	switch typ {
	case "run.finished", "run.failed", "run.cancelled", "session.compacted":
		return true
	}
	return strings.HasSuffix(typ, ".turn.ended")
}

// tokenWords is what a row adds about its session's tokens: their words
// on a row that shows them, when known and changed since the session's
// last such row.
func (p *Printer) tokenWords(ev *aep.Event) string {
	sid := rowSession(ev)
	s := p.tokens[sid]
	if s == nil || !showsTokens(ev.Type) {
		return ""
	}
	c := s.Context
	if _, ok := c.Fill(); !ok && ev.Type == "session.compacted" {
		// Its phrase already says the size after compacting.
		c = Context{}
	}
	w := TokenWords(s.Usage, c)
	if w == "" || w == p.tokensShown[sid] {
		return ""
	}
	if p.tokensShown == nil {
		p.tokensShown = map[string]string{}
	}
	p.tokensShown[sid] = w
	return w
}
