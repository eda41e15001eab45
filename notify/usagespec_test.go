package notify

import (
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

func TestParseUsage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		spec, want string
	}{
		{"", ""},
		{"  ", ""},
		{"context=80%", "context=80%"},
		{"context=80%,tokens=200k", "context=80%,tokens=200k"},
		{"tokens=200000, context=1%", "tokens=200k,context=1%"},
		{"tokens=1.5M", "tokens=1.5M"},
		{"tokens=1.25M", "tokens=1250k"},
		{"tokens=1234567", "tokens=1234567"},
		{"tokens=0.5k", "tokens=500"},
		{"tokens=1", "tokens=1"},
		{"context=100%,context=95%", "context=100%,context=95%"},
		{"tokens=9007199254740991", "tokens=9007199254740991"},
		{"context=80%\n", "context=80%"},
	} {
		s, err := ParseUsage(c.spec)
		if err != nil {
			t.Errorf("ParseUsage(%q): %v", c.spec, err)
			continue
		}
		if s.String() != c.want {
			t.Errorf("ParseUsage(%q) = %q, want %q", c.spec, s, c.want)
		}
	}
}

func TestParseUsageRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		spec, says string
	}{
		{",", `--notify-usage "": an empty threshold`},
		{"context=80%,", `an empty threshold`},
		{"context", `--notify-usage "context": not KIND=VALUE`},
		{"context=80", `context wants a whole percentage`},
		{"context=0%", `from 1% to 100%`},
		{"context=101%", `from 1% to 100%`},
		{"context=80.5%", `whole percentage`},
		{"context=+80%", `whole percentage`},
		{"context=80 %", `whole percentage`},
		{"tokens=0", `tokens wants a whole number`},
		{"tokens=-1", `tokens wants`},
		{"tokens=1.5", `tokens wants`},
		{"tokens=1.2345k", `tokens wants`},
		{"tokens=200K", `tokens wants`},
		{"tokens=1e6", `tokens wants`},
		{"tokens=9007199254740992", `tokens wants`},
		{"tokens=99999999999999999999M", `tokens wants`},
		{"tokens=.5k", `tokens wants`},
		{"Context=80%", `unknown kind "Context": want context or tokens`},
		{"burn=1M", `unknown kind "burn"`},
		{"context=80%,context=80%", `context=80% is named twice`},
		{"tokens=200k,tokens=200000", `tokens=200k is named twice`},
		{"context=1%,context=2%,context=3%,context=4%,context=5%,context=6%,context=7%,context=8%,context=9%", `more than 8 thresholds`},
	} {
		_, err := ParseUsage(c.spec)
		if err == nil {
			t.Errorf("ParseUsage(%q) accepted", c.spec)
			continue
		}
		if !strings.Contains(err.Error(), c.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseUsage(%q): %q, want one line saying %q", c.spec, err, c.says)
		}
	}
}

func TestUsageOver(t *testing.T) {
	t.Parallel()
	ctx := UsageThreshold{Kind: UsageContext, Value: 80}
	tok := UsageThreshold{Kind: UsageTokens, Value: 200_000}
	meter := func(tokens, limit, in, out int64) consumer.Meter {
		var m consumer.Meter
		m.Context = consumer.Context{Tokens: tokens, Limit: limit, Known: tokens >= 0}
		m.Usage = consumer.Usage{InputTokens: in, OutputTokens: out, Known: in+out > 0}
		return m
	}
	for _, c := range []struct {
		m        consumer.Meter
		ctx, tok bool
	}{
		{meter(104857, 131072, 0, 0), false, false}, // 79.99...%
		{meter(104858, 131072, 0, 0), true, false},  // 80.0003%
		{meter(80, 100, 0, 0), true, false},         // exactly 80%
		{meter(99_000, 0, 0, 0), false, false},      // no limit known: no fill
		{meter(-1, 0, 199_999, 1), false, true},
		{meter(-1, 0, 199_998, 1), false, false},
	} {
		if got := ctx.Over(c.m); got != c.ctx {
			t.Errorf("context 80%% over %+v = %v", c.m.Context, got)
		}
		if got := tok.Over(c.m); got != c.tok {
			t.Errorf("200k tokens over %+v = %v", c.m.Usage, got)
		}
	}
	spec, _ := ParseUsage("tokens=1k,context=90%,context=70%")
	if spec.NearContext() != 70 {
		t.Errorf("NearContext = %d, want the lowest context threshold", spec.NearContext())
	}
	if (UsageSpec{tok}).NearContext() != DefaultNearContext {
		t.Errorf("NearContext without a context threshold is not the default")
	}
}

// FuzzParseUsage: any spec is thresholds or a one-line error, never a
// panic; what it accepts it writes back so that it parses to the same
// thresholds, each within its bounds.
func FuzzParseUsage(f *testing.F) {
	for _, s := range []string{
		"context=80%,tokens=200k", "tokens=1.5M", "context=100%", "tokens=0.001M", "tokens=9007199254740991",
		"context=80", "tokens=1.2345k", ",", "context=80%,context=80%", "x=1", "tokens=１k", "context=٨٠%",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ParseUsage(spec)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			return
		}
		if len(s) > MaxUsageThresholds {
			t.Errorf("%d thresholds accepted", len(s))
		}
		for _, th := range s {
			switch th.Kind {
			case UsageContext:
				if th.Value < 1 || th.Value > 100 {
					t.Errorf("context %d%% accepted", th.Value)
				}
			case UsageTokens:
				if th.Value < 1 || th.Value > maxUsageTokens {
					t.Errorf("tokens %d accepted", th.Value)
				}
			default:
				t.Errorf("kind %q accepted", th.Kind)
			}
		}
		again, err := ParseUsage(s.String())
		if err != nil || again.String() != s.String() || len(again) != len(s) {
			t.Fatalf("%q -> %q -> %q, %v", spec, s, again, err)
		}
		for i := range s {
			if again[i] != s[i] {
				t.Errorf("%q: threshold %d reads back as %v, was %v", spec, i, again[i], s[i])
			}
		}
	})
}
