package main

import (
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/syncmode"
)

// AEP_LOG_SYNC says whether a record left in the spool is synced; a value
// kimi-hook does not know is noted and the default kept (it never breaks
// the agent).
func TestLogSyncFromEnv(t *testing.T) {
	for _, c := range []struct {
		env  string
		want syncmode.Mode
		bad  bool
	}{
		{"", syncmode.Default, false},
		{"none", syncmode.None, false},
		{"interval", syncmode.Interval, false},
		{"sometimes", syncmode.Default, true},
	} {
		t.Setenv("AEP_LOG_SYNC", c.env)
		o, err := parseArgs(nil)
		if o.sync != c.want || (err != nil) != c.bad || c.bad && !strings.Contains(err.Error(), "AEP_LOG_SYNC") {
			t.Errorf("AEP_LOG_SYNC=%q: sync %q, err %v", c.env, o.sync, err)
		}
	}
}
