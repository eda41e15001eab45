package main

import (
	"flag"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/reftest"
)

var update = flag.Bool("update", false, "rewrite kimi-hook's part of docs/reference")

// TestReference keeps kimi-hook's part of docs/reference/commands.md in
// step with its flag table (-update rewrites it).
func TestReference(t *testing.T) {
	c := reftest.Command{
		Path:    "kimi-hook",
		Summary: "what Kimi runs for every hook: forwards the hook's payload to the adapter and relays its reply",
		Forms:   []string{"[" + strings.ReplaceAll(flagList(hookFlags()), " --", "] [--") + "]", "--version"},
		About: "Registered in Kimi's config.toml by `aep-setup write kimi-code`; reads the payload on stdin. " +
			"When the adapter is unreachable, slow or refuses the hook token, the payload goes to the spool, " +
			"which the adapter ingests later. A bad flag is reported on stderr and the hook delivered with defaults.",
		Exit: "Always exits 0, so a hook never breaks the agent; it prints only a decision or an instruction from the adapter.",
		Env:  []string{envHome, envLogSync},
	}
	for _, f := range hookFlags() {
		c.Flags = append(c.Flags, reftest.Flag{Name: f.Name, Arg: f.Arg, Default: f.Default, Usage: f.Usage})
	}
	got := reftest.Commands("kimi-hook", []reftest.Command{c})
	reftest.Section(t, reftest.File(t, "commands.md"), reftest.CommandsHead, "kimi-hook", reftest.Binaries, got, *update)
}

// TestFlagTableParses: every flag the table (and so the reference) names
// is one the parser takes, and an unknown one is refused naming them all.
func TestFlagTableParses(t *testing.T) {
	for _, a := range [][]string{{"--daemon", "http://h:1"}, {"--home=/x"}, {"--timeout", "45"}} {
		if _, err := parseArgs(a); err != nil {
			t.Errorf("%v: %v", a, err)
		}
	}
	o, _ := parseArgs([]string{"--daemon", "http://h:1", "--home", "/x", "--timeout", "45"})
	if o.daemon != "http://h:1" || o.home != "/x" || o.timeout.Seconds() != 45 {
		t.Errorf("parsed %+v", o)
	}
	_, err := parseArgs([]string{"--bogus", "1"})
	if err == nil || !strings.Contains(err.Error(), "--daemon URL --home DIR --timeout SECONDS") {
		t.Errorf("unknown flag: %v", err)
	}
}

// TestEnvironmentListed: the variables kimi-hook reads are the ones
// envtable.Table says it reads.
func TestEnvironmentListed(t *testing.T) {
	reftest.CheckAlso(t, "kimi-hook", map[string]bool{envHome: true, envLogSync: true})
}
