package main

import (
	"strings"
	"testing"
)

func TestOpenPrintsFragmentURL(t *testing.T) {
	t.Setenv("AEP_TOKEN", "tok en/+")
	t.Setenv("AEP_TOKEN_FILE", "")
	code, out, errOut := runIn(t, runOpen, "--relay", "http://127.0.0.1:9", "--print")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got, want := strings.TrimSpace(out), "http://127.0.0.1:9/#token=tok+en%2F%2B"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}
}

func TestDashUsage(t *testing.T) {
	cases := [][]string{
		{},
		{"--relay", "http://127.0.0.1:8787", "--listen", "0.0.0.0:8790"},
		{"--relay", "ftp://x", "--listen", "127.0.0.1:0"},
		{"--relay", "http://127.0.0.1:8787,/nonexistent/token", "--listen", "127.0.0.1:0"},
	}
	for _, args := range cases {
		if code, _, errOut := runIn(t, runDash, args...); code != 2 || errOut == "" {
			t.Errorf("dash %v: exit %d (%q), want 2 with a reason", args, code, errOut)
		}
	}
}
