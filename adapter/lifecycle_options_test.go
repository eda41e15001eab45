package adapter

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestLifecycleOptions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env       map[string]string
		args      []string
		stale, id time.Duration
		err       string
	}{
		{nil, nil, DefaultStaleAfter, DefaultIdleEnd, ""},
		{map[string]string{"AEP_KIMI_STALE_AFTER": "90s", "AEP_KIMI_IDLE_END": "10m"}, nil, 90 * time.Second, 10 * time.Minute, ""},
		{map[string]string{"AEP_KIMI_IDLE_END": "10m"}, []string{"--idle-end", "5m", "--stale-after", "1m"}, time.Minute, 5 * time.Minute, ""},
		{map[string]string{"AEP_KIMI_IDLE_END": "soon"}, nil, 0, 0, "AEP_KIMI_IDLE_END"},
		{map[string]string{"AEP_KIMI_STALE_AFTER": "-5s"}, nil, 0, 0, "AEP_KIMI_STALE_AFTER"},
		{nil, []string{"--idle-end", "1m"}, 0, 0, "must be longer"},
		{nil, []string{"--stale-after", "-1s"}, 0, 0, "positive"},
		{nil, []string{"--stale-after", "0s"}, DefaultStaleAfter, DefaultIdleEnd, ""},
	}
	for _, c := range cases {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var o Lifecycle
		o.BindFlags(fs, func(k string) string { return c.env[k] })
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		var cfg Config
		err := o.Apply(&cfg)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v %v: err %v, want %q", c.env, c.args, err, c.err)
			}
			continue
		}
		if err != nil || cfg.StaleAfter != c.stale || cfg.IdleEnd != c.id {
			t.Errorf("%v %v: %v %v %v", c.env, c.args, cfg.StaleAfter, cfg.IdleEnd, err)
		}
	}
}
