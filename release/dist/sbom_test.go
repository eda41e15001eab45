package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"
)

// goVersionM is what the go command reads of a binary's modules
// (`go version -m`): the module path at its version, a replaced one by
// its replacement, and the Go version; an independent reading of what
// the SBOM is made from.
func goVersionM(t *testing.T, bin string) (goVersion string, mods map[string]string) {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", bin, err)
	}
	mods = map[string]string{}
	var last string
	for i, line := range strings.Split(string(out), "\n") {
		f := strings.Split(strings.TrimSpace(line), "\t")
		switch {
		case i == 0:
			_, goVersion, _ = strings.Cut(line, ": ")
		case f[0] == "dep" && len(f) >= 3:
			last = f[1]
			mods[f[1]] = f[2]
		case f[0] == "=>" && len(f) >= 2:
			delete(mods, last)
			mods[f[1]] = "" // a local replacement has no version
			if len(f) >= 3 {
				mods[f[1]] = f[2]
			}
		}
	}
	return goVersion, mods
}

// uuidPattern is CycloneDX's serial number: a UUID URN of version 1-5.
var uuidPattern = regexp.MustCompile(`^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// checkSBOM reads an SBOM and checks it against the binaries it
// describes: the document is well formed (every reference resolves, one
// component per reference), each binary is listed with its SHA-256, and
// each depends on exactly the modules `go version -m` reads from it, at
// those versions, and on the Go it was built with.
func checkSBOM(t *testing.T, doc []byte, archive string, bins []string) {
	t.Helper()
	var bom cdxBOM
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&bom); err != nil {
		t.Fatalf("SBOM of %s: %v", archive, err)
	}
	if bom.BOMFormat != "CycloneDX" || bom.SpecVersion != cdxSpec || bom.Version != 1 || !uuidPattern.MatchString(bom.SerialNumber) {
		t.Errorf("SBOM header %q %q %d %q", bom.BOMFormat, bom.SpecVersion, bom.Version, bom.SerialNumber)
	}
	if _, err := time.Parse(time.RFC3339, bom.Metadata.Timestamp); err != nil {
		t.Errorf("timestamp: %v", err)
	}
	if !strings.Contains(string(doc), `"value": "`+archive+`"`) {
		t.Errorf("the SBOM does not name its archive %s", archive)
	}
	byRef := map[string]cdxComponent{bom.Metadata.Component.BOMRef: bom.Metadata.Component}
	for _, c := range bom.Components {
		if c.BOMRef == "" || byRef[c.BOMRef].BOMRef != "" {
			t.Errorf("component %q: empty or repeated bom-ref", c.Name)
		}
		if c.PURL != "" && c.PURL != c.BOMRef {
			t.Errorf("component %q: purl %q, bom-ref %q", c.Name, c.PURL, c.BOMRef)
		}
		byRef[c.BOMRef] = c
	}
	deps := map[string][]string{}
	for _, d := range bom.Dependencies {
		for _, r := range append([]string{d.Ref}, d.DependsOn...) {
			if _, ok := byRef[r]; !ok {
				t.Errorf("dependency names %q, which no component is", r)
			}
		}
		deps[d.Ref] = d.DependsOn
	}
	if len(deps[bom.Metadata.Component.BOMRef]) != len(bins) {
		t.Errorf("the release depends on %q, want the %d binaries", deps[bom.Metadata.Component.BOMRef], len(bins))
	}
	for _, bin := range bins {
		ref := "file:" + filepath.Base(bin)
		c, ok := byRef[ref]
		sum, err := fileSHA256(bin)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || len(c.Hashes) != 1 || c.Hashes[0] != (cdxHash{"SHA-256", sum}) {
			t.Errorf("%s: component %+v, want SHA-256 %s", ref, c, sum)
		}
		goVersion, mods := goVersionM(t, bin)
		got := map[string]string{}
		for _, r := range deps[ref] {
			got[byRef[r].Name] = byRef[r].Version
		}
		if got["stdlib"] != goVersion {
			t.Errorf("%s: stdlib %q, built with %q", ref, got["stdlib"], goVersion)
		}
		delete(got, "stdlib")
		for path, v := range mods {
			if got[path] != v {
				t.Errorf("%s links %s %s, the SBOM says %q", ref, path, v, got[path])
			}
		}
		for path := range got {
			if _, ok := mods[path]; !ok {
				t.Errorf("%s: the SBOM lists %s, which it does not link", ref, path)
			}
		}
	}
}

// The SBOM of two real binaries (kimi-hook and aep-setup, the small ones)
// lists what `go version -m` reads from each, and the same binaries give
// the same document.
func TestSBOM(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("end-to-end: builds binaries; skipped with -short")
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-trimpath", "-o", dir+string(filepath.Separator), "../../cmd/kimi-hook", "../../cmd/aep-setup")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	p := platform{runtime.GOOS, runtime.GOARCH}
	bins := []string{filepath.Join(dir, p.exe("kimi-hook")), filepath.Join(dir, p.exe("aep-setup"))}
	src := source{Version: "1.2.3", Commit: "c0ffee", Date: time.Unix(1700000000, 0).UTC()}
	doc, err := makeSBOM(src, "x.tar.gz", p, bins)
	if err != nil {
		t.Fatal(err)
	}
	checkSBOM(t, doc, "x.tar.gz", bins)
	if _, mods := goVersionM(t, bins[0]); len(mods) == 0 {
		t.Fatal("kimi-hook links no module: the comparison is empty")
	}
	again, err := makeSBOM(src, "x.tar.gz", p, bins)
	if err != nil || !bytes.Equal(doc, again) {
		t.Errorf("a second SBOM of the same binaries differs: %v", err)
	}
	other, _ := makeSBOM(src, "y.tar.gz", p, bins)
	if bytes.Equal(doc, other) {
		t.Error("SBOMs of two archives are the same document")
	}
	if _, err := makeSBOM(src, "x.tar.gz", p, []string{filepath.Join(dir, "absent")}); err == nil {
		t.Error("an SBOM of a missing binary")
	}
}

func TestGoPURL(t *testing.T) {
	t.Parallel()
	for _, c := range [][3]string{
		{"golang.org/x/sys", "v0.45.0", "pkg:golang/golang.org/x/sys@v0.45.0"},
		{"github.com/x/y", "v2.0.0+incompatible", "pkg:golang/github.com/x/y@v2.0.0%2Bincompatible"},
	} {
		if got := goPURL(c[0], c[1]); got != c[2] {
			t.Errorf("goPURL(%s, %s) = %s, want %s", c[0], c[1], got, c[2])
		}
	}
}
