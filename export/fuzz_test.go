package export

import (
	"testing"

	"github.com/aep-kimi/aep-kimi/aep"
)

// FuzzFromCE feeds arbitrary bytes to the CE inverse: it must never panic,
// and whatever it accepts must survive forward and inverse again unchanged.
func FuzzFromCE(f *testing.F) {
	f.Add([]byte(`{"specversion":"1.0","id":"01JX9YB0AAAA0000000000FUZZ","source":"aep://h/agent/a/session/s","type":"dev.aep.run.started","time":"2026-07-03T10:14:00.000Z","aepversion":"0.1","aepagentid":"a","aepsessionid":"s","aeprunid":"r","aepsequence":1,"aepepoch":0,"zz":"x","data":{"trigger":"user"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, _, err := FromCE(b)
		if err != nil {
			return
		}
		first, err := e.MarshalJSON()
		if err != nil {
			t.Fatalf("accepted event does not serialize: %v", err)
		}
		again, dropped, err := FromCE(ToCE(e))
		if err != nil || len(dropped) > 0 {
			t.Fatalf("forward of an accepted event is not accepted back: %v %v\n%s", err, dropped, first)
		}
		second, _ := again.MarshalJSON()
		c1, err1 := aep.CanonicalRaw(first)
		c2, err2 := aep.CanonicalRaw(second)
		if err1 != nil || err2 != nil || string(c1) != string(c2) {
			t.Fatalf("round trip changed the event:\n%s\n%s", first, second)
		}
	})
}
