package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/fleetpage"
)

func TestOpenPrintsFragmentURL(t *testing.T) {
	t.Setenv("AEP_TOKEN", "tok en/+")
	t.Setenv("AEP_TOKEN_FILE", "")
	code, out, errOut := runIn(t, "open", "--relay", "http://127.0.0.1:9", "--print")
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
		if code, _, errOut := runIn(t, "dash", args...); code != 2 || errOut == "" {
			t.Errorf("dash %v: exit %d (%q), want 2 with a reason", args, code, errOut)
		}
	}
}

// TestOpenHandsTheOpenerAFile runs `aep-kimi open` with a stand-in opener
// that records its arguments: it gets the path of a private file that
// redirects to the login URL, never the token itself.
func TestOpenHandsTheOpenerAFile(t *testing.T) {
	const token = "s3cret-token-value"
	bin, home := t.TempDir(), filepath.Join(t.TempDir(), "home")
	argsFile := filepath.Join(bin, "args")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + argsFile + "\n"
	for _, name := range []string{"xdg-open", "open"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("AEP_TOKEN", token)
	t.Setenv("AEP_TOKEN_FILE", "")
	code, out, errOut := runIn(t, "open", "--relay", "http://127.0.0.1:9", "--home", home)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := filepath.Join(home, fleetpage.OpenFileName)
	if strings.Contains(out+errOut, token) || strings.TrimSpace(out) != want {
		t.Errorf("printed %q (stderr %q), want the file's path and no token", out, errOut)
	}
	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatalf("the opener did not run: %v", err)
	}
	if got := strings.TrimSpace(string(args)); got != want {
		t.Errorf("opener got %q, want %q", got, want)
	}
	st, err := os.Lstat(want)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Errorf("%s is mode %v, want 0600", want, st.Mode().Perm())
	}
	page, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `http-equiv="refresh" content="0;url=http://127.0.0.1:9/#token=`+token+`"`) {
		t.Errorf("%s does not redirect to the login URL:\n%s", want, page)
	}
	// A link planted where the file belongs is replaced, never written
	// through: its target keeps its bytes.
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, plant := range []func(string, string) error{os.Symlink, os.Link} {
		if err := os.Remove(want); err != nil {
			t.Fatal(err)
		}
		if err := plant(victim, want); err != nil {
			t.Fatal(err)
		}
		if code, _, errOut := runIn(t, "open", "--relay", "http://127.0.0.1:9", "--home", home); code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if b, _ := os.ReadFile(victim); string(b) != "keep" {
			t.Fatalf("the planted link's target was written: %q", b)
		}
		if st, err := os.Lstat(want); err != nil || !st.Mode().IsRegular() {
			t.Fatalf("%s is not a fresh regular file: %v %v", want, st, err)
		}
	}
}
