package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
)

// Names of the release's files besides the archives.
const (
	formulaName = "aep-kimi.rb"
	sbomSuffix  = ".cdx.json"
)

// keptVersion names the file in -keep-binaries' directory that holds the
// version its binaries were stamped with.
const keptVersion = "VERSION"

// checksumsName is the checksum file of a version: sha256sum's format.
func checksumsName(version string) string { return "aep-kimi_" + version + "_checksums.txt" }

// archiveBase is a platform's archive name without its extension, and
// the directory its files unpack into.
func archiveBase(version string, p platform) string {
	return "aep-kimi_" + version + "_" + p.dir()
}

// make builds the release into r.out: for each target its archive and the
// archive's SBOM, then the formula and the checksums of them all. It
// returns the files' names.
func (r release) make(ctx context.Context, targets []platform) ([]string, error) {
	if err := os.MkdirAll(r.out, 0o755); err != nil {
		return nil, err
	}
	stage, err := os.MkdirTemp("", "aep-kimi-dist-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	readme := filepath.Join(r.root, "README.md")

	var archives []built
	var files []string
	for _, p := range targets {
		bindir := filepath.Join(stage, p.dir())
		if r.keep != "" {
			bindir = filepath.Join(r.keep, p.dir())
		}
		bins, err := r.build(ctx, p, bindir)
		if err != nil {
			return nil, err
		}
		members := []member{{Name: "README.md", Path: readme, Mode: 0o644}}
		for _, b := range bins {
			members = append(members, member{Name: filepath.Base(b), Path: b, Mode: 0o755})
		}
		base := archiveBase(r.src.Version, p)
		name := base + ".tar.gz"
		if p.OS == "windows" {
			name = base + ".zip"
		}
		if err := writeArchive(filepath.Join(r.out, name), base, members, r.src.Date, p.OS == "windows"); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		sum, err := fileSHA256(filepath.Join(r.out, name))
		if err != nil {
			return nil, err
		}
		archives = append(archives, built{Platform: p, Name: name, SHA256: sum})
		sbom, err := makeSBOM(r.src, name, p, bins)
		if err != nil {
			return nil, fmt.Errorf("SBOM of %s: %w", name, err)
		}
		if err := writeFile(filepath.Join(r.out, name+sbomSuffix), sbom); err != nil {
			return nil, err
		}
		files = append(files, name, name+sbomSuffix)
	}

	if r.keep != "" {
		// The packager checks it takes this release's binaries, not an
		// older run's.
		if err := writeFile(filepath.Join(r.keep, keptVersion), []byte(r.src.Version+"\n")); err != nil {
			return nil, err
		}
	}

	rb, err := formula(r.src, r.url, archives)
	if err != nil {
		return nil, err
	}
	if rb != nil {
		if err := writeFile(filepath.Join(r.out, formulaName), rb); err != nil {
			return nil, err
		}
		files = append(files, formulaName)
	}

	slices.Sort(files)
	var sums strings.Builder
	for _, f := range files {
		sum, err := fileSHA256(filepath.Join(r.out, f))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&sums, "%s  %s\n", sum, f)
	}
	name := checksumsName(r.src.Version)
	if err := writeFile(filepath.Join(r.out, name), []byte(sums.String())); err != nil {
		return nil, err
	}
	return append(files, name), nil
}

// writeFile replaces a release file; they are public.
func writeFile(path string, data []byte) error {
	return atomicfile.Write(path, data, atomicfile.Options{Perm: 0o644})
}
