package main

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// The request is composed by hand; it must read byte for byte as the
// headers the adapter parses always read.
func TestRequestBytes(t *testing.T) {
	at := time.Date(2026, 12, 5, 21, 0, 0, 123456789, time.FixedZone("x", 3600))
	for _, d := range []delivery{
		{payload: []byte(`{"hook_event_name":"PreToolUse"}`), at: at, id: "abc-42", pid: 4242, pidStart: "987654"},
		{payload: nil, at: at, id: "abc-43"},
	} {
		for _, token := range []string{"tok", ""} {
			var want bytes.Buffer
			fmt.Fprintf(&want, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n", "/x/hook", "127.0.0.1:9", len(d.payload))
			fmt.Fprintf(&want, "X-Kimi-Hook-Delivery: %s\r\nX-Kimi-Hook-Time: %s\r\n", d.id, d.at.UTC().Format(time.RFC3339Nano))
			fmt.Fprintf(&want, "X-Kimi-Hook-Wait-Ms: %d\r\n", 8500)
			if d.pid > 0 {
				fmt.Fprintf(&want, "X-Kimi-Hook-Pid: %d\r\nX-Kimi-Hook-Pid-Start: %s\r\n", d.pid, d.pidStart)
			}
			if token != "" {
				fmt.Fprintf(&want, "Authorization: Bearer %s\r\n", token)
			}
			want.WriteString("\r\n")
			want.Write(d.payload)
			if got := d.request("/x/hook", "127.0.0.1:9", 8500, token); !bytes.Equal(got, want.Bytes()) {
				t.Errorf("request =\n%q\nwant\n%q", got, want.Bytes())
			}
		}
	}
}

// A request is one allocation: the buffer, sized up front.
func TestRequestOneAllocation(t *testing.T) {
	d := delivery{payload: bytes.Repeat([]byte("x"), 600), at: time.Now(), id: "abc-42", pid: 4242, pidStart: "987654"}
	if n := testing.AllocsPerRun(20, func() { d.request("/hook", "127.0.0.1:9", 8500, "0123456789abcdef0123456789abcdef") }); n > 1 {
		t.Fatalf("request: %v allocations, want 1", n)
	}
}

// The adapter answers almost every hook with {}: reading it decodes nothing
// (decoding grew a held hook's goroutine stack, a fresh 16 KiB of pages).
func TestDecisionOutputEmptyReplyAllocatesNothing(t *testing.T) {
	for _, s := range []string{"{}", "{}\n", " {} "} {
		reply := []byte(s)
		if n := testing.AllocsPerRun(20, func() {
			if decisionOutput(reply) != nil {
				t.Fatalf("decisionOutput(%q) printed something", reply)
			}
		}); n != 0 {
			t.Errorf("decisionOutput(%q): %v allocations, want 0", reply, n)
		}
	}
	if out := decisionOutput([]byte(`{"message": "hi"}`)); string(out) != `{"message":"hi"}` {
		t.Errorf("decisionOutput(message) = %q", out)
	}
}
