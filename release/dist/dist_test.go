package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// EnvDist names a release .ci/run has built already (go run ./release/dist
// -o DIR, in place of a build for each platform of its own): TestRelease
// checks that one rather than building the five platforms again.
const EnvDist = "AEP_KIMI_RELEASE_DIST"

// EnvKept names where that build kept its binaries (-keep-binaries), for
// release/npm.sh to package.
const EnvKept = "AEP_KIMI_DIST_BINARIES"

// TestRelease builds the release (or takes $AEP_KIMI_RELEASE_DIST) and
// checks what a user downloads: five archives, each with the three
// commands built for its platform (static, -trimpath) and the README, an
// SBOM per archive true to its binaries, checksums that verify every file
// and list nothing else, and a formula that gives each Homebrew machine
// its own archive; the binaries for this machine run and say the
// release's version.
func TestRelease(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end: builds the release for five platforms; skipped with -short")
	}
	dir, kept := os.Getenv(EnvDist), os.Getenv(EnvKept)
	if dir == "" {
		dir, kept = t.TempDir(), t.TempDir()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"-o", dir, "-keep-binaries", kept}, os.Getenv, &stdout, &stderr); code != 0 {
			t.Fatalf("dist exited %d:\n%s", code, stderr.Bytes())
		}
	}
	sumsFiles, _ := filepath.Glob(filepath.Join(dir, "aep-kimi_*_checksums.txt"))
	if len(sumsFiles) != 1 {
		t.Fatalf("checksum files %q, want one", sumsFiles)
	}
	version := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(sumsFiles[0]), "aep-kimi_"), "_checksums.txt")

	// The checksums verify every file and list all of them but themselves.
	sums := map[string]string{}
	f, err := os.Open(sumsFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok || len(sum) != 64 || strings.ContainsAny(name, "/\\") {
			t.Fatalf("checksum line %q", sc.Text())
		}
		got, err := fileSHA256(filepath.Join(dir, name))
		if err != nil || got != sum {
			t.Errorf("%s: sha256 %s (%v), the checksums say %s", name, got, err, sum)
		}
		sums[name] = sum
	}
	f.Close()
	targets, _ := parsePlatforms(DefaultPlatforms)
	want := []string{formulaName}
	var archives []built
	for _, p := range targets {
		name := archiveBase(version, p) + ".tar.gz"
		if p.OS == "windows" {
			name = archiveBase(version, p) + ".zip"
		}
		want = append(want, name, name+sbomSuffix)
		archives = append(archives, built{p, name, sums[name]})
	}
	entries, _ := os.ReadDir(dir)
	var have []string
	for _, e := range entries {
		if e.Name() != filepath.Base(sumsFiles[0]) {
			have = append(have, e.Name())
		}
	}
	slices.Sort(want)
	if !slices.Equal(have, want) || len(sums) != len(want) {
		t.Fatalf("release files %q, checksummed %d, want %q", have, len(sums), want)
	}

	for _, a := range archives {
		fi, _ := os.Stat(filepath.Join(dir, a.Name))
		t.Logf("%s: %.1f MB", a.Name, float64(fi.Size())/1e6)
		bins, binSums := checkArchive(t, filepath.Join(dir, a.Name), version, a.Platform)
		doc, err := os.ReadFile(filepath.Join(dir, a.Name+sbomSuffix))
		if err != nil {
			t.Fatal(err)
		}
		checkSBOM(t, doc, a.Name, bins)
		if kept != "" {
			checkKept(t, kept, version, a.Platform, binSums)
		}
		if a.Platform == (platform{runtime.GOOS, runtime.GOARCH}) {
			checkRuns(t, bins, version)
		}
	}
	checkFormula(t, filepath.Join(dir, formulaName), version, archives)
}

// checkArchive unpacks one archive into a temporary directory, checks its
// entries and its binaries' build, and returns the binaries' paths and
// their SHA-256 sums, taken as they were unpacked.
func checkArchive(t *testing.T, path, version string, p platform) (bins []string, sums map[string]string) {
	t.Helper()
	top := archiveBase(version, p)
	names := []string{top + "/", top + "/README.md"}
	for _, c := range commands {
		names = append(names, top+"/"+p.exe(c))
	}
	var got []string
	out := t.TempDir()
	sums = map[string]string{}
	walkArchive(t, path, func(e entry, r io.Reader) {
		got = append(got, e.Name)
		base := filepath.Base(e.Name)
		if !slices.Contains(commands, strings.TrimSuffix(base, ".exe")) {
			return
		}
		if e.Mode.Perm() != 0o755 {
			t.Errorf("%s: mode %v", e.Name, e.Mode)
		}
		bin := filepath.Join(out, base)
		sum, err := writeHashed(bin, r)
		if err != nil {
			t.Fatal(err)
		}
		bins = append(bins, bin)
		sums[bin] = sum
		checkBuild(t, bin, p, strings.TrimSuffix(base, ".exe"))
	})
	if !slices.Equal(got, names) {
		t.Errorf("%s holds %q, want %q", filepath.Base(path), got, names)
	}
	return bins, sums
}

// writeHashed copies r into a new executable file at path and returns the
// bytes' SHA-256, in one pass.
func writeHashed(path string, r io.Reader) (sum string, err error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(f, h), r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return hex.EncodeToString(h.Sum(nil)), err
}

// checkKept checks that the binaries -keep-binaries left for p are the
// archive's own bytes (by SHA-256), under the release's version: what the
// npm packages ship is what the archives ship.
func checkKept(t *testing.T, kept, version string, p platform, sums map[string]string) {
	t.Helper()
	if v, err := os.ReadFile(filepath.Join(kept, keptVersion)); err != nil || strings.TrimSpace(string(v)) != version {
		t.Errorf("kept binaries' version %q (%v), want %s", v, err, version)
	}
	for bin, want := range sums {
		got, err := fileSHA256(filepath.Join(kept, p.dir(), filepath.Base(bin)))
		if err != nil || got != want {
			t.Errorf("%s kept for %s: sha256 %s (%v), the archive's is %s", filepath.Base(bin), p, got, err, want)
		}
	}
}

// checkBuild reads a binary's build information: the command's package,
// built for p, static and with -trimpath.
func checkBuild(t *testing.T, bin string, p platform, command string) {
	t.Helper()
	bi, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if bi.Path != module+"/cmd/"+command || settings["GOOS"] != p.OS || settings["GOARCH"] != p.Arch ||
		settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("%s for %s: package %s, settings %v", command, p, bi.Path, settings)
	}
}

// checkRuns runs the binaries built for this machine: each says the
// release's version, as stamped by the linker.
func checkRuns(t *testing.T, bins []string, version string) {
	t.Helper()
	for _, bin := range bins {
		out, err := exec.Command(bin, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), version) {
			t.Errorf("%s --version: %v %q, want %s", filepath.Base(bin), err, out, version)
		}
	}
	out, err := exec.Command(bins[0], "version", "--json").Output()
	var v struct{ Version, Commit string }
	if err != nil || json.Unmarshal(out, &v) != nil || v.Version != version || v.Commit == "" {
		t.Errorf("aep-kimi version --json: %v %s", err, out)
	}
}
