// Package aeptest holds comparisons and builders of AEP values for tests.
package aeptest

import (
	"encoding/json"
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Canon is v in AEP's canonical JSON, so two values compare as strings: raw
// JSON bytes are re-canonicalized, anything else is marshalled canonically.
func Canon(t testing.TB, v any) string {
	t.Helper()
	var b []byte
	var err error
	if raw, ok := v.([]byte); ok {
		b, err = aep.CanonicalRaw(raw)
	} else {
		b, err = aep.Canonical(v)
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// EventTime is the time of every event Event builds.
const EventTime = "2026-07-03T10:14:00.000Z"

// Event is event seq (epoch 0) of kimi's session, at EventTime, of type typ
// with severity sev ("" for info) and data (JSON text).
func Event(session string, seq int64, typ, sev, data string) *aep.Event {
	return &aep.Event{AEP: "0.1", ID: aep.NewID(), Type: typ, Time: EventTime,
		Source: "aep://h/agent/kimi/session/" + session, Agent: "kimi", Session: session,
		Seq: aep.Int64(seq), Epoch: aep.Int64(0), Severity: sev, Data: json.RawMessage(data)}
}
