package emitter

import (
	"log/slog"
	"testing"
)

// A descriptor bound stays under a quarter of the file limit, whatever was
// configured; an unknown limit leaves it as configured (or its default).
func TestFDShareBound(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	cases := []struct {
		configured, def int
		limit           uint64
		want            int
	}{
		{0, 1024, 0, 1024},
		{0, 1024, 256, 64},
		{100, 1024, 256, 64},
		{10, 1024, 256, 10},
		{0, 256, 1 << 20, 256},
		{0, 1024, 2, 1},
	}
	for _, c := range cases {
		if got := fdShareBound("x", c.configured, c.def, c.limit, log); got != c.want {
			t.Errorf("fdShareBound(%d, %d, limit %d) = %d, want %d", c.configured, c.def, c.limit, got, c.want)
		}
	}
}
