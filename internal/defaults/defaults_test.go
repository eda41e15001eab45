package defaults

import (
	"testing"
	"time"
)

func TestSet(t *testing.T) {
	s := ""
	Set(&s, "d")
	if s != "d" {
		t.Errorf("zero string: got %q", s)
	}
	s = "x"
	Set(&s, "d")
	if s != "x" {
		t.Errorf("set string overwritten: got %q", s)
	}
	var p *int
	one := 1
	Set(&p, &one)
	if p != &one {
		t.Error("nil pointer not given the default")
	}
}

func TestPositive(t *testing.T) {
	d := time.Duration(0)
	if err := Positive("c", "D", &d, time.Second); err != nil || d != time.Second {
		t.Errorf("zero duration: %v, %v", d, err)
	}
	d = 2 * time.Second
	if err := Positive("c", "D", &d, time.Second); err != nil || d != 2*time.Second {
		t.Errorf("set duration: %v, %v", d, err)
	}
	d = -time.Second
	err := Positive("c", "D", &d, time.Second)
	if err == nil || err.Error() != "c: D must not be negative (got -1s)" {
		t.Errorf("negative duration: err %v", err)
	}
	if d != time.Second {
		t.Errorf("negative duration left %v, want the default", d)
	}
	n := -3
	if err := Positive("relay config", "Buffer", &n, 10); err == nil || err.Error() != "relay config: Buffer must not be negative (got -3)" {
		t.Errorf("negative int: err %v", err)
	}
}

func TestSetPositive(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{{0, time.Second}, {-time.Second, time.Second}, {2 * time.Second, 2 * time.Second}} {
		d := c.in
		SetPositive(&d, time.Second)
		if d != c.want {
			t.Errorf("SetPositive(%v) = %v, want %v", c.in, d, c.want)
		}
	}
}
