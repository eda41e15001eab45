// Package aeptest holds comparisons of AEP values for tests.
package aeptest

import (
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
