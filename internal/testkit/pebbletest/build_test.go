package pebbletest

import (
	"context"
	"net"
	"os"
	"testing"
)

// TestBuild builds the pinned Pebble into the cache: how CI prepares it
// ahead of the tests that run it. It runs only when asked
// (-run '^TestBuild$' with AEP_KIMI_PEBBLE_BUILD=1).
func TestBuild(t *testing.T) {
	if os.Getenv("AEP_KIMI_PEBBLE_BUILD") == "" {
		t.Skipf("skipping: set AEP_KIMI_PEBBLE_BUILD=1 to build Pebble %s into %s", Version, CacheDir())
	}
	bin, err := Bin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
		t.Fatalf("built %s is not an executable: %v", bin, err)
	}
	t.Logf("pebble %s at %s", Version, bin)
}

// The test's DNS server answers A queries with 127.0.0.1 and anything else
// with nothing, over a real socket.
func TestDNS(t *testing.T) {
	addr := serveDNS(t)
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	query := func(qtype byte) []byte {
		q := []byte{0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0,
			5, 'r', 'e', 'l', 'a', 'y', 4, 't', 'e', 's', 't', 0, 0, qtype, 0, 1}
		if _, err := c.Write(q); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 512)
		n, err := c.Read(b)
		if err != nil {
			t.Fatal(err)
		}
		return b[:n]
	}
	a := query(1)
	if a[0] != 0xab || a[1] != 0xcd || a[2]&0x80 == 0 || a[7] != 1 || string(a[len(a)-4:]) != "\x7f\x00\x00\x01" {
		t.Errorf("A answer % x", a)
	}
	if aaaa := query(28); aaaa[7] != 0 || aaaa[3]&0x0f != 0 {
		t.Errorf("AAAA answer % x, want no records, no error", aaaa)
	}
	for _, bad := range [][]byte{nil, {1, 2, 3}, {0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 63}} {
		if _, err := dnsAnswer(bad); err == nil {
			t.Errorf("% x answered", bad)
		}
	}
}

// FuzzDNSAnswer: whatever arrives on the test's DNS port, an answer or an
// error, never a panic.
func FuzzDNSAnswer(f *testing.F) {
	f.Add([]byte{0xab, 0xcd, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 0, 0, 1, 0, 1})
	f.Add([]byte{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c})
	f.Fuzz(func(t *testing.T, q []byte) {
		resp, err := dnsAnswer(q)
		if err == nil && len(resp) < dnsHeaderLen {
			t.Fatalf("answer of %d bytes", len(resp))
		}
	})
}
