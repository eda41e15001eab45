package main

import (
	"crypto/sha1"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// The SBOM is CycloneDX 1.5 JSON, one per archive, made from the build
// information the Go linker embeds in each binary (what `go version -m`
// prints): exactly the modules, at the versions, that the binaries link,
// for their platform. Syft and cyclonedx-gomod read the same; this needs
// neither, and nothing from the network.

// cdxSpec is the CycloneDX version written.
const cdxSpec = "1.5"

type cdxBOM struct {
	BOMFormat    string          `json:"bomFormat"`
	SpecVersion  string          `json:"specVersion"`
	SerialNumber string          `json:"serialNumber"`
	Version      int             `json:"version"`
	Metadata     cdxMetadata     `json:"metadata"`
	Components   []cdxComponent  `json:"components"`
	Dependencies []cdxDependency `json:"dependencies"`
}

type cdxMetadata struct {
	Timestamp string       `json:"timestamp"`
	Tools     cdxTools     `json:"tools"`
	Component cdxComponent `json:"component"`
}

type cdxTools struct {
	Components []cdxComponent `json:"components"`
}

type cdxComponent struct {
	Type       string        `json:"type"`
	BOMRef     string        `json:"bom-ref,omitempty"`
	Name       string        `json:"name"`
	Version    string        `json:"version,omitempty"`
	PURL       string        `json:"purl,omitempty"`
	Hashes     []cdxHash     `json:"hashes,omitempty"`
	Properties []cdxProperty `json:"properties,omitempty"`
}

type cdxHash struct {
	Alg     string `json:"alg"`
	Content string `json:"content"`
}

type cdxProperty struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type cdxDependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn"`
}

// goPURL is the package URL of a Go module version.
func goPURL(path, version string) string {
	// A purl's version escapes what is not unreserved; Go versions may
	// carry "+incompatible".
	return "pkg:golang/" + path + "@" + strings.ReplaceAll(version, "+", "%2B")
}

// stdlibComponent names the Go standard library a binary was built with, as
// vulnerability databases know it (Go's own as "stdlib").
func stdlibComponent(goVersion string) cdxComponent {
	return cdxComponent{Type: "library", BOMRef: goPURL("stdlib", strings.TrimPrefix(goVersion, "go")),
		Name: "stdlib", Version: goVersion, PURL: goPURL("stdlib", strings.TrimPrefix(goVersion, "go"))}
}

// makeSBOM describes the archive named archive, holding the binaries:
// the release as the subject, each binary (its SHA-256, platform and
// build settings) and each module any of them links, with which binary
// links which.
func makeSBOM(src source, archive string, p platform, binaries []string) ([]byte, error) {
	rootRef := goPURL(module, "v"+src.Version)
	bom := cdxBOM{
		BOMFormat:   "CycloneDX",
		SpecVersion: cdxSpec,
		Version:     1,
		Metadata: cdxMetadata{
			Timestamp: src.Date.UTC().Format(time.RFC3339),
			Tools:     cdxTools{Components: []cdxComponent{{Type: "application", Name: "aep-kimi release/dist", Version: src.Version}}},
			Component: cdxComponent{Type: "application", BOMRef: rootRef, Name: "aep-kimi", Version: src.Version, PURL: rootRef,
				Properties: []cdxProperty{{"aep-kimi:archive", archive}, {"aep-kimi:commit", src.Commit}, {"aep-kimi:platform", p.String()}}},
		},
	}
	mods := map[string]cdxComponent{}
	var binRefs []string
	ident := sha1.New()
	for _, path := range binaries {
		bi, err := buildinfo.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		sum, err := fileSHA256(path)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(ident, "%s %s\n", filepath.Base(path), sum)
		ref := "file:" + filepath.Base(path)
		binRefs = append(binRefs, ref)
		bin := cdxComponent{Type: "application", BOMRef: ref, Name: filepath.Base(path), Version: src.Version,
			Hashes:     []cdxHash{{"SHA-256", sum}},
			Properties: []cdxProperty{{"go:package", bi.Path}, {"go:version", bi.GoVersion}}}
		for _, s := range bi.Settings {
			bin.Properties = append(bin.Properties, cdxProperty{"go:build:" + s.Key, s.Value})
		}
		bom.Components = append(bom.Components, bin)

		std := stdlibComponent(bi.GoVersion)
		mods[std.BOMRef] = std
		deps := []string{std.BOMRef}
		for _, m := range bi.Deps {
			c := moduleComponent(m)
			mods[c.BOMRef] = c
			deps = append(deps, c.BOMRef)
		}
		slices.Sort(deps)
		bom.Dependencies = append(bom.Dependencies, cdxDependency{Ref: ref, DependsOn: slices.Compact(deps)})
	}
	for _, ref := range slices.Sorted(maps.Keys(mods)) {
		bom.Components = append(bom.Components, mods[ref])
	}
	bom.Dependencies = append([]cdxDependency{{Ref: rootRef, DependsOn: binRefs}}, bom.Dependencies...)
	// The serial number names this document: the same binaries in the
	// same archive get the same one (a name-based UUID, version 5).
	fmt.Fprintf(ident, "%s\n", archive)
	bom.SerialNumber = "urn:uuid:" + uuid5(ident.Sum(nil))
	b, err := json.MarshalIndent(bom, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// moduleComponent is one module a binary links; a replaced module is
// named by what replaced it, the module it stands for kept as a property.
func moduleComponent(m *debug.Module) cdxComponent {
	use := m
	var props []cdxProperty
	if m.Replace != nil {
		use = m.Replace
		props = append(props, cdxProperty{"go:module:replaces", m.Path + "@" + m.Version})
	}
	if use.Sum != "" {
		props = append(props, cdxProperty{"go:module:sum", use.Sum})
	}
	c := cdxComponent{Type: "library", Name: use.Path, Version: use.Version, Properties: props}
	if use.Version != "" && use.Version != "(devel)" {
		c.PURL = goPURL(use.Path, use.Version)
		c.BOMRef = c.PURL
	} else { // a local replacement: no version to name it by
		c.BOMRef = "gomod:" + use.Path
	}
	return c
}

// uuid5 formats the first 16 bytes of a SHA-1 digest as a version 5 UUID.
func uuid5(sum []byte) string {
	u := slices.Clone(sum[:16])
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	h := hex.EncodeToString(u)
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// fileSHA256 is the hex SHA-256 of a file's bytes.
func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
