package kimiharness

import (
	"fmt"
	"os"
	"time"
)

// EnvLaunchLog names a file that, when set, gets one line for every Kimi
// process the suite ran to its end: what ran, its Kimi home (a temporary
// directory named after the test), its CPU and wall time. The CPU is
// wait4's, so it covers what Kimi itself waited for (its hooks, its tool
// commands). Counting is how the suite's Kimi cost is measured per test.
const EnvLaunchLog = "AEP_KIMI_LAUNCH_LOG"

// LogLaunch appends one line to $AEP_KIMI_LAUNCH_LOG, if set, for a Kimi
// process that ran from started and ended with ps (nil: it never ended, so
// nothing is written). The line is tab-separated: what, home, user CPU
// seconds, system CPU seconds, wall seconds.
func LogLaunch(what, home string, started time.Time, ps *os.ProcessState) {
	path := os.Getenv(EnvLaunchLog)
	if path == "" || ps == nil {
		return
	}
	user, sys := ps.UserTime().Seconds(), ps.SystemTime().Seconds()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return // counting is best effort; the test is the subject
	}
	defer f.Close()
	// One write per line, so concurrent tests and packages never interleave.
	f.WriteString(fmt.Sprintf("%s\t%s\t%.3f\t%.3f\t%.3f\n", what, home, user, sys, time.Since(started).Seconds())) //nolint:errcheck // best effort
}
