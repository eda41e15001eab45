package stacktest

import (
	"strconv"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
)

func Atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// AuditStream is the audit's recorded stream with people, rules and
// timeouts (relay/consumer's), without its extension.
func AuditStream(t testing.TB) string {
	return fixtures.InModule(t, "relay", "consumer", "testdata", "audit", "people")
}
