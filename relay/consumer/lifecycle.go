package consumer

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// sourceSession reads the session and chapter a source URI names
// (aep://HOST/agent/AGENT/session/ID[/chapter/N]): agent.* events carry no
// session, so a session's presence is told by its source. ok is false for
// an emitter's own source.
func sourceSession(source string) (session string, chapter int, ok bool) {
	_, rest, found := strings.Cut(source, "/session/")
	if !found {
		return "", 0, false
	}
	chapter = 1
	if id, n, cut := strings.Cut(rest, "/chapter/"); cut {
		if c, err := strconv.Atoi(n); err == nil && c > 1 {
			rest, chapter = id, c
		}
	}
	session, err := url.PathUnescape(rest)
	if err != nil || session == "" {
		return "", 0, false
	}
	return session, chapter, true
}

// rowSession is the session a row is about: its own, or for an agent-scoped
// event the one its source names.
func rowSession(ev *aep.Event) string {
	if k, ok := companionOf(ev); ok {
		return k
	}
	if ev.Session != "" {
		return ev.Session
	}
	if s, _, ok := sourceSession(ev.Source); ok {
		return s
	}
	return ""
}

// KimiSessionOf is the session a person knows ev's session as: the Kimi
// session a companion's event names, else the event's own session.
func KimiSessionOf(ev *aep.Event) string {
	if k, ok := companionOf(ev); ok {
		return k
	}
	return ev.Session
}

// companionOf is the Kimi session ev's session is another view of
// (mapping.ExtKimiSession: the kimi web bridge's companion session).
func companionOf(ev *aep.Event) (string, bool) {
	k, ok := ev.ExtString(mapping.ExtKimiSession)
	if !ok || k == "" || ev.Session == "" || k == ev.Session {
		return "", false
	}
	return k, true
}

// lifecycleText adds what the adapter observed about a session's life: the
// chapter a resumed session is in, and an end seen from outside Kimi.
func lifecycleText(ev *aep.Event, add func(string)) {
	if _, ch, ok := sourceSession(ev.Source); ok && ch > 1 && ev.Type == "session.started" {
		add("chapter " + strconv.Itoa(ch))
	}
	if how, ok := ev.ExtString(mapping.ExtObserved); ok && ev.Type == "session.ended" {
		switch how {
		case mapping.ObservedProcess:
			add("Kimi exited without SessionEnd")
		case mapping.ObservedSilence:
			add("silent past the idle limit")
		default:
			add("observed: " + how)
		}
	}
}
