package consumer

import (
	"cmp"
	"slices"
	"time"

	"github.com/aep-kimi/aep-kimi/mapping"
)

// Meter is a session's token figures as its events say them: the tokens
// used, how full its context is, and how fast it burns tokens. The fold
// keeps one per session; a consumer that keeps no story (the notifier's
// usage watch, the terminal printer) keeps only this. The zero value has
// seen nothing.
type Meter struct {
	Usage   Usage
	Context Context
	// minutes are the tokens used per minute of the events' own clock,
	// ascending, spanning at most burnWindow up to the latest minute any
	// usage fell in: what BurnPerHour sums.
	minutes []minuteTokens
}

type minuteTokens struct{ minute, tokens int64 }

// burnWindow is the span BurnPerHour sums, in whole minutes of the events'
// own times: the latest usage's minute and the 59 before it.
const burnWindow = 60

// Take counts one event's token figures: typ is its type, at its time
// (RFC 3339; usage in an event whose time does not parse counts in Usage
// but not in the burn).
func (m *Meter) Take(typ, at string, data map[string]any) {
	var used int64
	counted := false
	for k, dst := range map[string]*int64{mapping.DataInputTokens: &m.Usage.InputTokens, mapping.DataOutputTokens: &m.Usage.OutputTokens} {
		if n, ok := tokenCount(data, k); ok {
			*dst += n
			used = saturatingAdd(used, n)
			m.Usage.Known, counted = true, true
		}
	}
	if counted {
		if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
			m.addMinute(minuteOf(t), used)
		}
	}
	n, ok := tokenCount(data, mapping.DataContextTokens)
	if !ok && typ == "session.compacted" {
		n, ok = tokenCount(data, "estimated_token_count")
	}
	if ok {
		m.Context.Tokens, m.Context.Known = n, true
	}
	if l, ok := tokenCount(data, mapping.DataContextLimit); ok && l > 0 {
		m.Context.Limit = l
	}
}

// minuteOf is t's minute since the Unix epoch, rounded down (as the page
// reckons it from milliseconds).
func minuteOf(t time.Time) int64 {
	ms := t.UnixMilli()
	if ms < 0 {
		return (ms - 59_999) / 60_000
	}
	return ms / 60_000
}

// addMinute adds n tokens used in minute min, and drops the minutes that
// fell out of the window: the result is the same whatever order the
// events come in.
func (m *Meter) addMinute(min, n int64) {
	if len(m.minutes) > 0 && min <= m.latest()-burnWindow {
		return
	}
	i := len(m.minutes)
	for i > 0 && m.minutes[i-1].minute > min {
		i--
	}
	if i > 0 && m.minutes[i-1].minute == min {
		m.minutes[i-1].tokens = saturatingAdd(m.minutes[i-1].tokens, n)
		return
	}
	m.minutes = append(m.minutes, minuteTokens{})
	copy(m.minutes[i+1:], m.minutes[i:])
	m.minutes[i] = minuteTokens{min, n}
	m.trim(m.latest())
}

func (m *Meter) latest() int64 { return m.minutes[len(m.minutes)-1].minute }

// trim drops the minutes at or before end-burnWindow.
func (m *Meter) trim(end int64) {
	k := 0
	for k < len(m.minutes) && m.minutes[k].minute <= end-burnWindow {
		k++
	}
	m.minutes = append(m.minutes[:0], m.minutes[k:]...)
}

// saturatingAdd adds token counts, held within maxTokenCount.
func saturatingAdd(a, b int64) int64 {
	return min(a+b, maxTokenCount)
}

// BurnPerHour is the tokens the session used (input and output) in the
// hour up to its latest usage: the events' minutes within burnWindow of
// the latest. It is a fact of the events alone, so it stays what it was
// once a session goes quiet; BurnAt reads it against a clock.
func (m Meter) BurnPerHour() int64 {
	var sum int64
	for _, b := range m.minutes {
		sum = saturatingAdd(sum, b.tokens)
	}
	return sum
}

// BurnAt is the tokens the session used in the hour up to now: a session
// quiet for an hour burns none.
func (m Meter) BurnAt(now time.Time) int64 {
	end := minuteOf(now)
	var sum int64
	for _, b := range m.minutes {
		if b.minute > end-burnWindow && b.minute <= end {
			sum = saturatingAdd(sum, b.tokens)
		}
	}
	return sum
}

// Join is the meter of one Kimi session seen through several emitters
// (a companion's, o, joined to its own, m): usage and burn add up, and
// the context is o's when o knows it.
func (m Meter) Join(o Meter) Meter {
	out := Meter{Usage: m.Usage, Context: m.Context}
	out.Usage.InputTokens += o.Usage.InputTokens
	out.Usage.OutputTokens += o.Usage.OutputTokens
	out.Usage.Known = m.Usage.Known || o.Usage.Known
	if o.Context.Known {
		out.Context = o.Context
	}
	out.minutes = append(append(out.minutes, m.minutes...), o.minutes...)
	if len(out.minutes) == 0 {
		return out
	}
	// Merge by minute, then keep the window up to the latest of both.
	slices.SortStableFunc(out.minutes, func(a, b minuteTokens) int { return cmp.Compare(a.minute, b.minute) })
	merged := out.minutes[:1]
	for _, b := range out.minutes[1:] {
		if last := &merged[len(merged)-1]; last.minute == b.minute {
			last.tokens = saturatingAdd(last.tokens, b.tokens)
		} else {
			merged = append(merged, b)
		}
	}
	out.minutes = merged
	out.trim(out.latest())
	return out
}
