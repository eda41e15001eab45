package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/aeptest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/relaytest"
	"github.com/aep-kimi/aep-kimi/relay"
)

func tailRun(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runIn(t, "tail", args...)
}

func TestTailTimelineAndResume(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: "tok"})
	state := filepath.Join(t.TempDir(), "tail-state.json")
	asked := aeptest.Event("s2", 0, "attention.requested", "notice", `{"kind":"permission","prompt":"Allow Bash?","options":[{"id":"allow"},{"id":"deny"}]}`)
	answered := aeptest.Event("s2", 1, "attention.answered", "notice", `{"answer":{"option":"deny"},"by":"aep-kimi-page","via":"control"}`)
	answered.Subject = asked.ID
	srv.Post(t,
		aeptest.Event("s1", 0, "tool.requested", "info", `{"tool":{"name":"Shell"}}`),
		aeptest.Event("s1", 1, "attention.requested", "notice", `{"kind":"permission","prompt":"Allow Shell:\nrm -rf build?"}`),
		asked, answered,
	)
	code, out, errOut := tailRun(t, "--relay", srv.URL, "--token", "tok", "--from", "all", "--once", "--state", state)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The replay's rows, then the one request still waiting, with the
	// command that answers it; the answered one gets no command.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 7 || !strings.Contains(lines[6], "aep-kimi respond --relay "+srv.URL+" --text 'your answer' s1 ") || strings.Count(out, "aep-kimi respond") != 1 {
		t.Fatalf("want 4 timeline rows, then the waiting request and its answer line, got:\n%s", out)
	}
	for _, want := range [][]string{
		{"s1", "calls Shell"},
		{"s1", "Allow Shell: rm -rf build?"},
		{"s2", "Allow Bash?"},
		{"s2", "answered deny by you from the page"},
		{"1 request still waiting"},
		{"s1", "Allow Shell: rm -rf build?"},
	} {
		l := lines[0]
		lines = lines[1:]
		for _, w := range want {
			if !strings.Contains(l, w) {
				t.Errorf("line %q lacks %q", l, w)
			}
		}
		if strings.Contains(l, "\x1b[") || strings.Contains(l, "attention.") {
			t.Errorf("colour codes or an event type name: %q", l)
		}
	}
	// A second run resumes from the state file: only the new event shows.
	srv.Post(t, aeptest.Event("s1", 2, "run.finished", "info", `{"status":"success"}`))
	code, out, _ = tailRun(t, "--relay", srv.URL, "--token", "tok", "--once", "--state", state)
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "turn finished") {
		t.Fatalf("resumed run (exit %d):\n%s", code, out)
	}
	// --from all replays what the relay holds, whatever the state file has
	// seen (issue 36).
	code, out, _ = tailRun(t, "--relay", srv.URL, "--token", "tok", "--from", "all", "--once", "--state", state)
	if code != 0 || !strings.Contains(out, "calls Shell") || !strings.Contains(out, "Allow Bash?") || !strings.Contains(out, "turn finished") {
		t.Fatalf("--from all after the state saw it all (exit %d):\n%s", code, out)
	}
}

func TestTailErrors(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: "tok"})
	wrong := filepath.Join(t.TempDir(), "wrong.token")
	if err := os.WriteFile(wrong, []byte("nope"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"bad filter", []string{"--filter", `{"seq":1}`}, 2, "--filter"},
		{"bad capture", []string{"--capture", "all"}, 2, "--capture"},
		{"bad from", []string{"--from", "yesterday"}, 2, "--from"},
		{"wrong token", []string{"--relay", srv.URL, "--token-file", wrong, "--once", "--state", "none"}, 1, "403"},
		{"stray argument", []string{"extra"}, 2, "unexpected argument"},
		// --once reads what the relay holds and ends: a relay it cannot
		// reach is the answer, not a reason to wait.
		{"once, relay down", []string{"--relay", "http://" + netaddr.FreeAddr(t), "--once", "--state", "none"}, 1, "unreachable"},
		{"not a URL", []string{"--relay", "127.0.0.1:8787"}, 2, `aep-kimi tail: relay URL "127.0.0.1:8787" is not an http(s) URL`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := tailRun(t, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.msg) || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Fatalf("exit %d, stderr %q; want exit %d and one line naming %q", code, errOut, tc.code, tc.msg)
			}
		})
	}
}

// An unreachable relay is reported once, without credentials, while the
// tail keeps retrying until it is stopped.
func TestTailUnreachableSaysSoOnce(t *testing.T) {
	t.Parallel()
	addr := netaddr.FreeAddr(t)
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	code := runContext(ctx, []string{"tail", "--relay", "http://user:pw@" + addr + "/?access_token=sekrit", "--state", "none"},
		stdio{in: strings.NewReader(""), out: &out, err: &errb}, os.Getenv)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if n := strings.Count(errb.String(), "unreachable"); n != 1 {
		t.Fatalf("reported %d times:\n%s", n, errb.String())
	}
	if strings.Contains(errb.String(), "sekrit") || strings.Contains(errb.String(), "pw@") {
		t.Fatalf("credentials echoed: %s", errb.String())
	}
}

// tail reads the relay token from --token-file (a file readable by others
// is refused); --token still works but warns that a command line is
// readable by every local user.
func TestTailTokenFile(t *testing.T) {
	t.Parallel()
	srv := relaytest.RunServer(t, relay.Config{Token: "tail-token-0123456789"})
	srv.Post(t, aeptest.Event("s1", 0, "tool.requested", "info", `{"tool":{"name":"Shell"}}`))
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("tail-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--relay", srv.URL, "--from", "all", "--once", "--state", "none"}
	code, out, errOut := tailRun(t, append(base, "--token-file", file)...)
	if code != 0 || !strings.Contains(out, "calls Shell") || errOut != "" {
		t.Fatalf("--token-file: exit %d, out %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = tailRun(t, append(base, "--token", "tail-token-0123456789")...)
	if code != 0 || !strings.Contains(out, "calls Shell") || !strings.Contains(errOut, "warning: --token puts the relay token on the command line") {
		t.Fatalf("--token: exit %d, out %q, stderr %q", code, out, errOut)
	}
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := tailRun(t, append(base, "--token-file", file)...); code != 2 || !strings.Contains(errOut, "readable by others") {
		t.Fatalf("a world-readable --token-file: exit %d, stderr %q", code, errOut)
	}
	if code, _, errOut := tailRun(t, append(base, "--token-file", file, "--token", "x")...); code != 2 || !strings.Contains(errOut, "exclude each other") {
		t.Fatalf("both: exit %d, stderr %q", code, errOut)
	}
}
