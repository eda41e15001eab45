package export

import (
	"encoding/json"

	"github.com/aep-kimi/aep-kimi/aep"
)

// DefaultMaxCapture is the exporter ceiling when none is given (AEP-0005
// §3.3, §4.6): backends see only metadata-level payloads unless the operator
// opts into more.
const DefaultMaxCapture = aep.CaptureMetadata

// survivingData returns the payload an exporter with ceiling max may ship
// for e: all of it when e's capture is at or below the ceiling, nothing
// otherwise. Dropping the whole payload is the down-level that cannot leak
// (a bridge has no source context to re-derive lower-level fields), and the
// event keeps its own capture claim so the backend can tell why the payload
// is missing. An unknown capture counts as full.
func survivingData(e *aep.Event, max aep.Capture) json.RawMessage {
	if e.Data == nil {
		return nil
	}
	c, err := aep.ParseCapture(e.Capture)
	if err != nil {
		c = aep.CaptureFull
	}
	if c > max || c == aep.CaptureNone {
		return nil
	}
	return e.Data
}
