package backoff

import (
	"context"
	"testing"
	"time"
)

// top always draws the largest jitter, so Next returns the undelayed d.
func top(n int64) int64 { return n }

func delays(b *Backoff, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = b.Next()
	}
	return out
}

func equal(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDoublesUpToMax(t *testing.T) {
	b := &Backoff{Min: 100 * time.Millisecond, Max: time.Second, Rand: top}
	got := delays(b, 6)
	want := []time.Duration{100e6, 200e6, 400e6, 800e6, 1e9, 1e9}
	if !equal(got, want) {
		t.Fatalf("delays %v, want %v", got, want)
	}
}

func TestJitterSpansHalfToFull(t *testing.T) {
	var asked []int64
	low := func(n int64) int64 { asked = append(asked, n); return 0 }
	b := &Backoff{Min: 100 * time.Millisecond, Max: time.Second, Rand: low}
	if got := delays(b, 3); !equal(got, []time.Duration{50e6, 100e6, 200e6}) {
		t.Fatalf("lowest jitter gave %v, want half of each delay", got)
	}
	if len(asked) != 3 || asked[0] != int64(50*time.Millisecond) || asked[2] != int64(200*time.Millisecond) {
		t.Fatalf("jitter span asked %v, want half of each delay", asked)
	}
	// The default source stays within [d/2, d].
	b = &Backoff{Min: 10 * time.Millisecond, Max: 10 * time.Millisecond}
	for range 1000 {
		if d := b.Next(); d < 5*time.Millisecond || d > 10*time.Millisecond {
			t.Fatalf("default jitter gave %v outside [5ms, 10ms]", d)
		}
	}
}

func TestResetOnlyAfterAHealthyConnection(t *testing.T) {
	b := &Backoff{Min: 100 * time.Millisecond, Max: time.Second, Rand: top}
	delays(b, 3) // 100, 200, 400: the next is 800
	b.Up(999 * time.Millisecond)
	if d := b.Next(); d != 800*time.Millisecond {
		t.Fatalf("after a short connection the delay is %v, want it still growing (800ms)", d)
	}
	b.Up(time.Second)
	if d := b.Next(); d != 100*time.Millisecond {
		t.Fatalf("after a connection up for Max the delay is %v, want Min", d)
	}
}

func TestZeroValueUsesDefaults(t *testing.T) {
	var b Backoff
	b.Rand = top
	if d := b.Next(); d != DefaultMin {
		t.Fatalf("zero Backoff first delay %v, want %v", d, DefaultMin)
	}
	for range 20 {
		b.Next()
	}
	if d := b.Next(); d != DefaultMax {
		t.Fatalf("zero Backoff caps at %v, want %v", d, DefaultMax)
	}
	// Max below Min is taken as Min.
	b = Backoff{Min: time.Second, Max: time.Millisecond, Rand: top}
	if got := delays(&b, 2); !equal(got, []time.Duration{time.Second, time.Second}) {
		t.Fatalf("Max < Min gave %v", got)
	}
}

func TestWaitEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	b := &Backoff{Min: time.Hour, Max: time.Hour}
	if b.Wait(ctx) {
		t.Fatal("Wait on a cancelled context reported the full delay")
	}
	if !Sleep(context.Background(), time.Millisecond) {
		t.Fatal("Sleep with a live context did not complete")
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"12":                            12 * time.Second,
		"-3":                            0,
		"soon":                          0,
		"Tue, 01 Dec 2026 18:00:30 GMT": 30 * time.Second,
		"Tue, 01 Dec 2026 17:00:00 GMT": 0,
	} {
		if got := RetryAfter(v, now); got != want {
			t.Errorf("RetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

// A peer's asked-for delay lifts the next delay to it, up to Max; the
// backoff's own growth goes on underneath.
func TestNextAtLeast(t *testing.T) {
	t.Parallel()
	b := &Backoff{Min: 10 * time.Millisecond, Max: time.Second, Rand: top}
	for _, c := range []struct{ asked, want time.Duration }{
		{0, 10 * time.Millisecond},
		{300 * time.Millisecond, 300 * time.Millisecond},
		{time.Hour, time.Second},
		{0, 80 * time.Millisecond},
	} {
		if got := b.NextAtLeast(c.asked); got != c.want {
			t.Errorf("NextAtLeast(%v) = %v, want %v", c.asked, got, c.want)
		}
	}
}
