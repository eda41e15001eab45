package setup

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/aep-kimi/aep-kimi/mapping"
)

// ExtendedEventsSince is the first Kimi release whose hook enum has the four
// newer events (TurnStarted, UserPromptQueued, SessionHeartbeat, TaskStarted);
// the published 0.31.0 bundle has none of them.
const ExtendedEventsSince = "0.32.0"

// Counts of the two event sets.
const (
	BaseEventCount     = 16
	ExtendedEventCount = 20
)

// isExtendedOnly reports the four events that first appear in 0.32.0.
func isExtendedOnly(event string) bool {
	switch event {
	case mapping.HookTurnStarted, mapping.HookUserPromptQueued, mapping.HookSessionHeartbeat, mapping.HookTaskStarted:
		return true
	}
	return false
}

// AllHookEvents returns the 20 events Kimi 0.32.0 and later accept, in 2.1.0's
// enum order (the mapping table's list; both sets are rendered in this order
// so a block never changes just by reordering). The slice is a fresh copy.
func AllHookEvents() []string { return mapping.HooksKimi0_32() }

// BaseHookEvents returns the 16 events every Kimi release we know accepts
// (the safe set), in 2.1.0's enum order. The slice is a fresh copy.
func BaseHookEvents() []string {
	out := make([]string, 0, BaseEventCount)
	for _, e := range mapping.HooksKimi0_32() {
		if !isExtendedOnly(e) {
			out = append(out, e)
		}
	}
	return out
}

// HookEvents returns the events the given Kimi version accepts: 20 from
// ExtendedEventsSince on, 16 before it. An empty or unparsable version means
// "unknown" and gets the safe 16, since registering an event the installed
// Kimi does not know would make it drop every hook.
func HookEvents(version string) []string {
	v, err := ParseVersion(version)
	if err != nil || !v.HasExtendedEvents() {
		return BaseHookEvents()
	}
	return AllHookEvents()
}

// IsHookEvent reports whether event is one of the 20 names any known Kimi
// release accepts.
func IsHookEvent(event string) bool { return mapping.KnownHook(event) }

// Version is a parsed Kimi release number.
type Version struct {
	Major, Minor, Patch int
	// Pre is the pre-release suffix without its dash ("" for a release).
	Pre string
}

// versionRE finds X.Y.Z[-pre] not preceded by a digit or dot, so an
// overlong number is rejected rather than read from its tail.
var versionRE = regexp.MustCompile(`(?:^|[^0-9.])(\d{1,9})\.(\d{1,9})\.(\d{1,9})(?:-([0-9A-Za-z.-]+))?`)

// ParseVersion finds the first semver-like "X.Y.Z[-pre]" in s, so both "2.1.0"
// and "kimi version 2.1.0" parse.
func ParseVersion(s string) (Version, error) {
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("no version number in %q", s)
	}
	var v Version
	var err error
	if v.Major, err = strconv.Atoi(m[1]); err != nil {
		return Version{}, fmt.Errorf("parse version %q: %w", s, err)
	}
	if v.Minor, err = strconv.Atoi(m[2]); err != nil {
		return Version{}, fmt.Errorf("parse version %q: %w", s, err)
	}
	if v.Patch, err = strconv.Atoi(m[3]); err != nil {
		return Version{}, fmt.Errorf("parse version %q: %w", s, err)
	}
	v.Pre = m[4]
	return v, nil
}

func (v Version) String() string {
	s := strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) + "." + strconv.Itoa(v.Patch)
	if v.Pre != "" {
		s += "-" + v.Pre
	}
	return s
}

// Less orders versions by number; a pre-release sorts before its release
// (pre-release suffixes among themselves compare as strings, which is enough
// for the one threshold we test).
func (v Version) Less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	if v.Patch != o.Patch {
		return v.Patch < o.Patch
	}
	switch {
	case v.Pre == o.Pre:
		return false
	case v.Pre == "":
		return false
	case o.Pre == "":
		return true
	}
	return v.Pre < o.Pre
}

// HasExtendedEvents reports whether this version accepts the 20-event set.
// A 0.32.0 pre-release counts as older: only the published 0.32.0 is known to
// have the new events.
func (v Version) HasExtendedEvents() bool {
	return !v.Less(extendedSince)
}

// extendedSince is ExtendedEventsSince parsed (a test keeps them in step).
var extendedSince = Version{Major: 0, Minor: 32, Patch: 0}
