package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
)

// brewFacts is what testdata/brew.rb reads off a formula on one machine.
type brewFacts struct {
	Version  string
	URLs     []string
	SHA256s  []string
	Installs []string
	Service  struct {
		Run       []string
		KeepAlive bool `json:"keep_alive"`
	}
	Tested bool
}

// checkFormula loads the formula at path as brew would on each machine
// Homebrew installs on, and checks that each downloads exactly its own
// platform's archive, with that archive's checksum, installs the three
// commands and runs `aep-kimi up` as a service kept alive.
func checkFormula(t *testing.T, path, version string, archives []built) {
	t.Helper()
	ruby := proctest.Require(t, "ruby", "apt-get install ruby")
	if code, out := proctest.Run(t, exec.Command(ruby, "-c", path)); code != 0 {
		t.Fatalf("ruby -c %s: %s", path, out)
	}
	for _, p := range []platform{{"darwin", "arm64"}, {"darwin", "amd64"}, {"linux", "arm64"}, {"linux", "amd64"}} {
		cmd := exec.Command(ruby, filepath.Join("testdata", "brew.rb"), brewNames[p.OS], brewNames[p.Arch], path)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("brew.rb on %s: %v\n%s", p, err, errOutput(err))
		}
		var f brewFacts
		if err := json.Unmarshal(out, &f); err != nil {
			t.Fatalf("brew.rb on %s: %v: %s", p, err, out)
		}
		i := slices.IndexFunc(archives, func(a built) bool { return a.Platform == p })
		if i < 0 {
			t.Fatalf("no archive for %s", p)
		}
		want := archives[i]
		if len(f.URLs) != 1 || !strings.HasSuffix(f.URLs[0], "/"+want.Name) || len(f.SHA256s) != 1 || f.SHA256s[0] != want.SHA256 {
			t.Errorf("on %s brew downloads %q with sha256 %q, want %s with %s", p, f.URLs, f.SHA256s, want.Name, want.SHA256)
		}
		if f.Version != version || !slices.Equal(f.Installs, commands) || !f.Tested {
			t.Errorf("on %s: version %q installs %q tested %v", p, f.Version, f.Installs, f.Tested)
		}
		if !slices.Equal(f.Service.Run, []string{"/opt/homebrew/opt/aep-kimi/bin/aep-kimi", "up"}) || !f.Service.KeepAlive {
			t.Errorf("on %s the service runs %q, keep_alive %v", p, f.Service.Run, f.Service.KeepAlive)
		}
	}
}

func errOutput(err error) []byte {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.Stderr
	}
	return nil
}

// The formula of a release of the five platforms: each Homebrew machine
// gets its own archive and checksum; Windows is not in it.
func TestFormula(t *testing.T) {
	t.Parallel()
	src := source{Version: "1.2.3-rc.1", Commit: "c0ffee", Date: time.Unix(1700000000, 0).UTC()}
	targets, err := parsePlatforms(DefaultPlatforms)
	if err != nil {
		t.Fatal(err)
	}
	var archives []built
	for i, p := range targets {
		archives = append(archives, built{Platform: p, Name: archiveBase(src.Version, p) + ".tar.gz", SHA256: strings.Repeat(string(rune('a'+i)), 64)})
	}
	rb, err := formula(src, DefaultURL, archives)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rb), "windows") || !strings.Contains(string(rb), "/releases/download/v1.2.3-rc.1/") {
		t.Errorf("formula:\n%s", rb)
	}
	path := filepath.Join(t.TempDir(), formulaName)
	if err := os.WriteFile(path, rb, 0o644); err != nil {
		t.Fatal(err)
	}
	checkFormula(t, path, src.Version, archives)

	// Only Windows: no formula at all.
	if rb, err := formula(src, DefaultURL, archives[4:]); err != nil || rb != nil {
		t.Errorf("a Windows-only release has a formula: %q %v", rb, err)
	}
	if _, err := formula(src, "{{.Nope}}", archives); err == nil {
		t.Error("a -url naming no field was taken")
	}
}
