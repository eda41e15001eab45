package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzReadResponse feeds arbitrary bytes to the hand-written HTTP reply
// parser: it must return an error or a bounded body, never panic or hang.
func FuzzReadResponse(f *testing.F) {
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 401 Unauthorized\r\n\r\nno"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n"))
	f.Add([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffff\r\n"))
	f.Add([]byte("garbage\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		status, body, err := readResponse(bufio.NewReader(bytes.NewReader(b)))
		if err != nil {
			return
		}
		if len(body) > 1<<20 {
			t.Fatalf("body of %d bytes exceeds the 1 MiB reply cap", len(body))
		}
		if !bytes.HasPrefix(b, []byte("HTTP/1.1 ")) && !bytes.HasPrefix(b, []byte("HTTP/1.0 ")) {
			t.Fatalf("accepted a reply without an HTTP/1 status line (status %d)", status)
		}
		if status < 100 || status > 999 {
			t.Fatalf("accepted status %d", status)
		}
	})
}

// FuzzDecisionOutput checks the only thing kimi-hook ever prints: nothing,
// or compact JSON that carries a decision or an instruction.
func FuzzDecisionOutput(f *testing.F) {
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"hookSpecificOutput":{"permissionDecision":"deny"}}`))
	f.Add([]byte(`{"message":"run the tests"}`))
	f.Add([]byte(`{"message":1, "x" : [1, 2]}`))
	f.Add([]byte(`[{"message":1}]`))
	f.Fuzz(func(t *testing.T, reply []byte) {
		out := decisionOutput(reply)
		if out == nil {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("printed %q, which is not a JSON object: %v", out, err)
		}
		_, decision := m["hookSpecificOutput"]
		_, message := m["message"]
		if !decision && !message {
			t.Fatalf("printed %q without a decision or a message", out)
		}
		if bytes.ContainsAny(out, "\n\r") {
			t.Fatalf("printed %q, which is not compact", out)
		}
	})
}

// FuzzHookName checks the fast path against a full decode: for any JSON
// object naming its hook once, both must agree.
func FuzzHookName(f *testing.F) {
	f.Add([]byte(`{"hook_event_name":"PreToolUse","session_id":"s"}`))
	f.Add([]byte(`{"session_id":"s","hook_event_name":"Stop"}`))
	f.Add([]byte(`{"hook_event_name":"Pre\u0054oolUse"}`))
	f.Add([]byte(`{"hook_event_name":""}`))
	f.Fuzz(func(t *testing.T, p []byte) {
		got := hookName(p)
		var v struct {
			Name string `json:"hook_event_name"`
		}
		if json.Unmarshal(p, &v) != nil || strings.Count(string(p), "hook_event_name") != 1 {
			return
		}
		if got != v.Name {
			t.Fatalf("hookName(%q) = %q, a full decode says %q", p, got, v.Name)
		}
	})
}
