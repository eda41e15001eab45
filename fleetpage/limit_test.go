package fleetpage

import (
	"fmt"
	"testing"
	"time"
)

func TestLoginLimiter(t *testing.T) {
	t.Parallel()
	l := newLoginLimiter(3, 10*time.Second)
	now := time.Unix(1000, 0)
	for i := range 3 {
		if ok, _ := l.allow("127.0.0.1:4000", now); !ok {
			t.Fatalf("attempt %d of the burst refused", i+1)
		}
	}
	ok, wait := l.allow("127.0.0.1:5000", now) // another port, the same address
	if ok || wait != 10*time.Second {
		t.Fatalf("past the burst: ok %v wait %v, want refused for 10s", ok, wait)
	}
	if ok, _ := l.allow("127.0.0.2:4000", now); !ok {
		t.Error("another address was limited")
	}
	if ok, _ := l.allow("127.0.0.1:4000", now.Add(10*time.Second)); !ok {
		t.Error("no attempt allowed after the interval")
	}
	if ok, wait := l.allow("127.0.0.1:4000", now.Add(11*time.Second)); ok || wait != 9*time.Second {
		t.Errorf("one interval buys one attempt: ok %v wait %v", ok, wait)
	}
	if ok, _ := l.allow("[::1]:80", now); !ok {
		t.Error("an IPv6 address refused")
	}
	// The addresses tracked stay bounded; idle ones go first.
	for i := range maxLimitedAddrs + 64 {
		l.allow(fmt.Sprintf("10.0.%d.%d:1", i/256, i%256), now.Add(time.Duration(i)*time.Millisecond))
	}
	if n := len(l.full); n > maxLimitedAddrs {
		t.Errorf("%d addresses tracked, bound %d", n, maxLimitedAddrs)
	}
}
