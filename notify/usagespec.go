package notify

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// What a usage threshold watches (--notify-usage KIND=VALUE).
const (
	// UsageContext: how full the session's context is, in percent of its
	// limit (context=80%): the session is about to compact.
	UsageContext = "context"
	// UsageTokens: the tokens the session used, input and output
	// (tokens=200k), as the page counts them.
	UsageTokens = "tokens"
)

// Bounds of a usage spec.
const (
	// MaxUsageThresholds bounds the thresholds one spec names.
	MaxUsageThresholds = 8
	// maxUsageTokens is the largest token count a threshold takes: the
	// most a token figure is (what a JavaScript number holds exactly).
	maxUsageTokens = 1<<53 - 1
	// DefaultNearContext is the context fill, in percent, at which the
	// page marks a session near its limit when --notify-usage names no
	// context threshold.
	DefaultNearContext = 80
)

// UsageThreshold is one threshold of --notify-usage: a session crossing
// it is notified once.
type UsageThreshold struct {
	Kind string // UsageContext or UsageTokens
	// Value is the percentage for UsageContext (1 to 100), the token
	// count for UsageTokens.
	Value int64
}

// String is the threshold as a spec writes it: context=80%, tokens=200k.
func (t UsageThreshold) String() string {
	if t.Kind == UsageContext {
		return t.Kind + "=" + strconv.FormatInt(t.Value, 10) + "%"
	}
	return t.Kind + "=" + tokenSpec(t.Value)
}

// Level is the threshold's value as a spec writes it: 80%, 200k.
func (t UsageThreshold) Level() string {
	_, v, _ := strings.Cut(t.String(), "=")
	return v
}

// Over reports whether a session's figures are at or past the threshold:
// a context threshold needs the context's limit known.
func (t UsageThreshold) Over(m consumer.Meter) bool {
	switch t.Kind {
	case UsageContext:
		c := m.Context
		// Integers: tokens*100 >= percent*limit, exact where a float is not.
		return c.Known && c.Limit > 0 && c.Tokens*100 >= t.Value*c.Limit
	case UsageTokens:
		return m.Usage.Known && m.Usage.InputTokens+m.Usage.OutputTokens >= t.Value
	}
	return false
}

// tokenSpec writes a count the shortest way ParseUsage reads back exactly:
// 200k, 1.5M, 123456.
func tokenSpec(n int64) string {
	for _, u := range []struct {
		size   int64
		suffix string
	}{{1_000_000, "M"}, {1000, "k"}} {
		if n < u.size {
			continue
		}
		whole, frac := n/u.size, n%u.size
		if frac == 0 {
			return strconv.FormatInt(whole, 10) + u.suffix
		}
		digits := strings.TrimRight(fmt.Sprintf("%0*d", len(strconv.FormatInt(u.size, 10))-1, frac), "0")
		if len(digits) <= 1 {
			return strconv.FormatInt(whole, 10) + "." + digits + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

// UsageSpec is a parsed --notify-usage: its thresholds in the order given.
type UsageSpec []UsageThreshold

// String is the spec as ParseUsage reads it back.
func (s UsageSpec) String() string {
	parts := make([]string, len(s))
	for i, t := range s {
		parts[i] = t.String()
	}
	return strings.Join(parts, ",")
}

// NearContext is the context fill, in percent, the page marks a session
// near its limit at: the lowest context threshold, else
// DefaultNearContext.
func (s UsageSpec) NearContext() int64 {
	near := int64(0)
	for _, t := range s {
		if t.Kind == UsageContext && (near == 0 || t.Value < near) {
			near = t.Value
		}
	}
	if near == 0 {
		return DefaultNearContext
	}
	return near
}

// errUsageSyntax is the shape every spec error names.
const usageSyntax = "want KIND=VALUE[,KIND=VALUE...] with context=PERCENT% or tokens=COUNT, e.g. context=80%,tokens=200k"

// ParseUsage parses a --notify-usage spec: comma-separated thresholds,
// context=PERCENT% (a whole percentage, 1% to 100%) and tokens=COUNT (a
// whole number of tokens, with k or M for thousands or millions: 200k,
// 1.5M). Each threshold is named once; "" is no thresholds. Every error
// is one line.
func ParseUsage(spec string) (UsageSpec, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	var out UsageSpec
	for item := range strings.SplitSeq(spec, ",") {
		item = strings.TrimSpace(item)
		t, err := parseThreshold(item)
		if err != nil {
			return nil, fmt.Errorf("--notify-usage %q: %w", item, err)
		}
		for _, o := range out {
			if o == t {
				return nil, fmt.Errorf("--notify-usage %q: %s is named twice", item, t)
			}
		}
		if len(out) == MaxUsageThresholds {
			return nil, fmt.Errorf("--notify-usage: more than %d thresholds", MaxUsageThresholds)
		}
		out = append(out, t)
	}
	return out, nil
}

func parseThreshold(item string) (UsageThreshold, error) {
	if item == "" {
		return UsageThreshold{}, errors.New("an empty threshold: " + usageSyntax)
	}
	kind, value, ok := strings.Cut(item, "=")
	if !ok {
		return UsageThreshold{}, errors.New("not KIND=VALUE: " + usageSyntax)
	}
	switch kind {
	case UsageContext:
		pct, ok := strings.CutSuffix(value, "%")
		n, err := strconv.ParseInt(pct, 10, 64)
		if !ok || err != nil || !allDigits(pct) || n < 1 || n > 100 {
			return UsageThreshold{}, errors.New("context wants a whole percentage from 1% to 100%, e.g. context=80%")
		}
		return UsageThreshold{Kind: UsageContext, Value: n}, nil
	case UsageTokens:
		n, ok := parseTokenCount(value)
		if !ok {
			return UsageThreshold{}, errors.New("tokens wants a whole number of tokens from 1, e.g. tokens=200000, tokens=200k or tokens=1.5M")
		}
		return UsageThreshold{Kind: UsageTokens, Value: n}, nil
	}
	return UsageThreshold{}, fmt.Errorf("unknown kind %q: want context or tokens", kind)
}

// parseTokenCount reads 200000, 200k, 1.5M (k and M are 10^3 and 10^6; a
// fraction only with one, and only as many digits as leave a whole count).
func parseTokenCount(s string) (int64, bool) {
	unit := int64(1)
	switch {
	case strings.HasSuffix(s, "k"):
		unit, s = 1000, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "M"):
		unit, s = 1_000_000, strings.TrimSuffix(s, "M")
	}
	whole, frac, dotted := strings.Cut(s, ".")
	if !allDigits(whole) || (dotted && (unit == 1 || !allDigits(frac))) {
		return 0, false
	}
	scale := unit
	var f int64
	for _, d := range frac {
		if scale /= 10; scale == 0 {
			return 0, false // finer than one token
		}
		f += int64(d-'0') * scale
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > (maxUsageTokens-f)/unit {
		return 0, false
	}
	n := w*unit + f
	return n, n >= 1
}

// allDigits reports a non-empty run of ASCII digits.
func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
