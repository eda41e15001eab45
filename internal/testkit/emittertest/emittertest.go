// Package emittertest drives a source of sessions (emitter) in tests: the
// commands a relay routes to it, and a publisher that records what it
// publishes.
package emittertest

import (
	"sync"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
)

// CommandSource is the source of the commands Command builds: an operator's
// dashboard.
const CommandSource = "aep://ops/agent/dashboard"

// Command is a sealed command of type typ for session, as a relay routes
// it: a fresh id, subject and data as given.
func Command(t testing.TB, typ, session, subject string, data map[string]any) *aep.Event {
	t.Helper()
	e := &aep.Event{AEP: aep.Version, ID: aep.NewID(), Type: typ, Time: aep.FormatTime(time.Now()),
		Source: CommandSource, Agent: "dashboard", Session: session, Subject: subject, Capture: "redacted"}
	if err := e.SetData(data); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Seal(); err != nil {
		t.Fatal(err)
	}
	return e
}

// Recorder is a publisher (journal.Publisher) that records every event, in
// publish order; safe for concurrent use. The zero value is ready.
type Recorder struct {
	mu     sync.Mutex
	events []*aep.Event
}

// Publish records ev.
func (r *Recorder) Publish(ev *aep.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

// All is every event published so far.
func (r *Recorder) All() []*aep.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*aep.Event(nil), r.events...)
}

// Find is the events of type typ published so far.
func (r *Recorder) Find(typ string) []*aep.Event {
	var out []*aep.Event
	for _, e := range r.All() {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// Wait polls until cond holds for the events published, and returns them;
// it fails the test after five seconds, naming what it waited for.
func (r *Recorder) Wait(t testing.TB, what string, cond func([]*aep.Event) bool) []*aep.Event {
	t.Helper()
	var evs []*aep.Event
	if poll.Until(5*time.Second, func() bool { evs = r.All(); return cond(evs) }) {
		return evs
	}
	evs = r.All()
	types := make([]string, len(evs))
	for i, e := range evs {
		types[i] = e.Type
	}
	t.Fatalf("timed out waiting for %s; published: %v", what, types)
	return nil
}
