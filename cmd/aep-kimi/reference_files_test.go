package main

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/reftest"
	"github.com/aep-kimi/aep-kimi/station"
)

// filesReference is files.md: station.HomeFiles for both homes.
func filesReference() string {
	var b strings.Builder
	b.WriteString(reftest.Banner + "# Files\n\n" +
		"What the binaries keep under `$AEP_HOME` (default `~/.aep`) and what aep-setup and bridge-web use under\n" +
		"Kimi's home, `$KIMI_CODE_HOME` (default `~/.kimi-code`). `<word>` and `*` stand for many names; a\n" +
		"path ending in `/` is a directory. Files under `$AEP_HOME` are opened without following symbolic\n" +
		"links, and one found looser than its mode is tightened; `$AEP_HOME` itself is left as it is.\n")
	for _, home := range []string{station.HomeAEP, station.HomeKimi} {
		fmt.Fprintf(&b, "\n## %s\n\n| path | mode | holds |\n|---|---|---|\n", home)
		for _, f := range station.HomeFiles(home) {
			mode := "–"
			if f.Mode != 0 {
				mode = fmt.Sprintf("%04o", f.Mode)
			}
			fmt.Fprintf(&b, "| %s | %s | %s |\n", reftest.Code(home+"/"+f.Path), mode, reftest.Cell(f.Holds))
		}
	}
	return b.String()
}

// startedHome is an AEP home the relay (jetstream, with a token), the
// adapter and the bridge were built on, as their commands build them.
func startedHome(t *testing.T) string {
	home := t.TempDir()
	getenv := daemonEnv(t, "AEP_HOME", home, "AEP_TOKEN", refToken)
	relayRegistry(t, getenv, "--store", "jetstream")
	adapterRegistry(t, getenv)
	bridgeRegistry(t, getenv)
	return home
}

// checkHomeFiles walks a home the daemons started on and checks that
// every file and directory there is one station.HomeFiles lists, with its
// mode.
func checkHomeFiles(t *testing.T, home string) {
	type pattern struct {
		re *regexp.Regexp
		f  station.HomeFile
	}
	var exact, wild []pattern
	for _, f := range station.HomeFiles(station.HomeAEP) {
		q := regexp.QuoteMeta(f.Path)
		q = regexp.MustCompile(`<[a-z]+>|\\\*`).ReplaceAllString(q, `[^/]+`)
		p := pattern{regexp.MustCompile("^" + q + "$"), f}
		if strings.ContainsAny(f.Path, "*<") {
			wild = append(wild, p)
		} else {
			exact = append(exact, p)
		}
	}
	seen := 0
	err := filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == home {
			return err
		}
		rel, _ := filepath.Rel(home, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		var match *station.HomeFile
		for _, p := range append(exact, wild...) {
			if p.re.MatchString(rel) || d.IsDir() && p.re.MatchString(strings.TrimSuffix(rel, "/")) {
				match = &p.f
				break
			}
		}
		if match == nil {
			t.Errorf("the daemons made $AEP_HOME/%s, which station.HomeFiles does not list", rel)
			return nil
		}
		seen++
		info, err := d.Info()
		if err != nil {
			return err
		}
		if match.Mode != 0 && runtime.GOOS != "windows" && info.Mode().Perm() != match.Mode {
			t.Errorf("$AEP_HOME/%s has mode %04o; station.HomeFiles says %04o", rel, info.Mode().Perm(), match.Mode)
		}
		if d.IsDir() && match.Mode == 0 {
			return filepath.SkipDir // someone else's (NATS's) layout
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen == 0 {
		t.Error("the daemons made nothing under the home: the check checked nothing")
	}
}
