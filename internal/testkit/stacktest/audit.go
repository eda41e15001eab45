package stacktest

import (
	"path/filepath"
	"strconv"
	"testing"
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
// timeouts (relay/consumer's), relative to a test package two levels below
// the module root (cmd/aep-kimi, e2e/AREA).
var AuditStream = filepath.Join("..", "..", "relay", "consumer", "testdata", "audit", "people")
