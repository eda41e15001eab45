package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/relaycall"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/relay"
)

func auditGolden(t *testing.T, ext string) string {
	t.Helper()
	b, err := os.ReadFile(stacktest.AuditStream(t) + ".audit." + ext)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The audit from the session logs, in each format, is the recorded
// stream's golden (the command reads, the consumer's fold decides), read
// from $AEP_HOME/logs or one directory of it; from the relay's replay it is
// what the logs say of the same events (a POST carries no commands, so
// the relay holds the emitter's events only).
func TestAuditSources(t *testing.T) {
	lines, err := os.ReadFile(stacktest.AuditStream(t) + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	logs := t.TempDir()
	writeLog := func(dir string, b []byte) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(logs, dir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(logs, dir, "people.jsonl"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeLog("kimi-code", lines)
	for _, format := range []struct{ flag, ext string }{{"", "txt"}, {"--json", "json"}, {"--csv", "csv"}} {
		want := auditGolden(t, format.ext)
		for _, dir := range []string{logs, filepath.Join(logs, "kimi-code")} {
			args := []string{"--logs", dir}
			if format.flag != "" {
				args = append(args, format.flag)
			}
			code, out, errOut := runIn(t, "audit", args...)
			if code != 0 || out != want {
				t.Errorf("audit %s: exit %d %s\n--- got\n%s--- want\n%s", strings.Join(args, " "), code, errOut, out, want)
			}
		}
	}

	var emitted [][]byte
	for _, l := range bytes.Split(bytes.TrimSpace(lines), []byte("\n")) {
		if !bytes.Contains(l, []byte(`"type": "control.attention.respond"`)) {
			emitted = append(emitted, l)
		}
	}
	srv := relaytest.RunServer(t, relay.Config{Token: "tok"})
	relaycall.PostLines(t, srv.URL, "tok", emitted...)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	onlyEmitted := t.TempDir()
	if err := os.WriteFile(filepath.Join(onlyEmitted, "people.jsonl"), append(bytes.Join(emitted, []byte("\n")), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	// Eleven outcomes: a line each, and the CSV's header.
	for format, lines := range map[string]int{"--json": 11, "--csv": 12} {
		_, fromLogs, _ := runIn(t, "audit", format, "--logs", onlyEmitted)
		code, fromRelay, errOut := runIn(t, "audit", format, "--relay", srv.URL, "--token-file", tokenFile)
		if code != 0 || fromRelay != fromLogs || strings.Count(fromRelay, "\n") != lines {
			t.Errorf("audit %s from the relay: exit %d %s\n--- got\n%s--- logs say\n%s", format, code, errOut, fromRelay, fromLogs)
		}
	}
}

// Usage mistakes and unreadable sources: exit 2 or 1 with one line.
func TestAuditErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--json", "--csv", "--logs", t.TempDir()}, 2, "choose one"},
		{[]string{"--since", "yesterday", "--logs", t.TempDir()}, 2, "--since yesterday: want a duration"},
		{[]string{"--logs", filepath.Join(t.TempDir(), "none")}, 1, "no such file"},
		{[]string{"--relay", "http://127.0.0.1:1", "--token-file", "/nonexistent/token"}, 2, "token"},
		{[]string{"extra"}, 2, ""},
	} {
		code, out, errOut := runIn(t, "audit", c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) || out != "" {
			t.Errorf("audit %v: exit %d, want %d; stdout %q; stderr %q", c.args, code, c.code, out, errOut)
		}
		if n := strings.Count(strings.TrimSpace(errOut), "\n"); c.says != "" && n != 0 {
			t.Errorf("audit %v: %d lines on stderr", c.args, n+1)
		}
	}
	// Nothing decided yet is no failure.
	code, out, _ := runIn(t, "audit", "--logs", t.TempDir())
	if code != 0 || !strings.Contains(out, "no attention request has an outcome yet") {
		t.Errorf("empty logs: exit %d: %q", code, out)
	}
}
