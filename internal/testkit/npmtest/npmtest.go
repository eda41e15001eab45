// Package npmtest gets the npm packages release/npm.sh makes and installs
// them as a user would, with the real npm: offline from the tarballs, or by
// name from a registry the test serves on loopback (Serve), so no test
// reaches the public registry.
package npmtest

import (
	"archive/tar"
	"context"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/aep-kimi/aep-kimi/internal/testkit/targz"
)

// EnvDir names a directory of tarballs release/npm.sh already made (CI
// builds all five platforms once and hands them to the tests); when it is
// unset, the tests build this platform's.
const EnvDir = "AEP_KIMI_NPM_DIR"

// Main is the main package's name; Scope holds the platform packages.
const (
	Main  = "aep-kimi"
	Scope = "@aep-kimi"
)

// Platform is this machine's platform package suffix, in Node's words
// (process.platform-process.arch), and whether npm.sh builds one for it.
func Platform() (string, bool) {
	plat := map[string]string{"windows": "win32"}[runtime.GOOS]
	if plat == "" {
		plat = runtime.GOOS
	}
	cpu := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	p := plat + "-" + cpu
	switch p {
	case "linux-x64", "linux-arm64", "darwin-x64", "darwin-arm64", "win32-x64":
		return p, true
	}
	return p, false
}

// Package is one tarball and its package.json.
type Package struct {
	File     string // absolute path of the .tgz
	Name     string
	Version  string
	Manifest map[string]any
	raw      []byte
}

// Set is the packages of one version found in a directory.
type Set struct {
	Version string
	Main    Package
	Host    Package // this platform's
	All     []Package
}

// Build runs release/npm.sh (under root, the repository) for this platform
// into dir, with env added to the process's environment.
func Build(ctx context.Context, root, dir string, env ...string) error {
	p, ok := Platform()
	if !ok {
		return fmt.Errorf("npm.sh builds no package for %s", p)
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "release", "npm.sh"), dir, p)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("release/npm.sh %s %s: %w\n%s", dir, p, err, out)
	}
	return nil
}

// Read finds the packages in dir: one version, the main package and this
// platform's.
func Read(dir string) (Set, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.tgz"))
	if err != nil {
		return Set{}, err
	}
	host, _ := Platform()
	var s Set
	for _, f := range files {
		p, err := readPackage(f)
		if err != nil {
			return Set{}, err
		}
		if s.Version == "" {
			s.Version = p.Version
		} else if p.Version != s.Version {
			return Set{}, fmt.Errorf("%s holds versions %s and %s: one version at a time", dir, s.Version, p.Version)
		}
		switch p.Name {
		case Main:
			s.Main = p
		case Scope + "/" + host:
			s.Host = p
		}
		s.All = append(s.All, p)
	}
	if s.Main.File == "" || s.Host.File == "" {
		return Set{}, fmt.Errorf("%s lacks %s or %s/%s (found %d tarballs)", dir, Main, Scope, host, len(files))
	}
	return s, nil
}

// readPackage reads the package.json of an npm tarball.
func readPackage(file string) (Package, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return Package{}, err
	}
	var p Package
	// The platform packages hold the binaries ahead of package.json.
	err = targz.Walk(abs, func(h *tar.Header, r io.Reader) (bool, error) {
		if h.Name != "package/package.json" {
			return true, nil
		}
		raw, err := io.ReadAll(r)
		if err != nil {
			return false, err
		}
		p = Package{File: abs, raw: raw}
		return false, nil
	})
	switch {
	case err != nil:
		return Package{}, err
	case p.raw == nil:
		return Package{}, fmt.Errorf("%s has no package/package.json", file)
	}
	if err := json.Unmarshal(p.raw, &p.Manifest); err != nil {
		return Package{}, fmt.Errorf("%s: package.json: %w", file, err)
	}
	p.Name, _ = p.Manifest["name"].(string)
	p.Version, _ = p.Manifest["version"].(string)
	if p.Name == "" || p.Version == "" {
		return Package{}, fmt.Errorf("%s: package.json has no name or version", file)
	}
	return p, nil
}

// Files lists a tarball's entries: path (without "package/") to mode.
func Files(file string) (map[string]os.FileMode, error) {
	out := map[string]os.FileMode{}
	err := targz.Walk(file, func(h *tar.Header, _ io.Reader) (bool, error) {
		out[strings.TrimPrefix(h.Name, "package/")] = os.FileMode(h.Mode).Perm()
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Env is npm's configuration for a user whose global prefix is prefix:
// `npm install -g` puts the commands in prefix/bin (the caller puts it on
// PATH, with a Node), and nothing nags about updates, funding or audits.
// npm's cache and npmrc follow HOME, which the caller sets.
func Env(prefix string) []string {
	return []string{
		"npm_config_prefix=" + prefix,
		"npm_config_update_notifier=false",
		"npm_config_fund=false",
		"npm_config_audit=false",
		"npm_config_loglevel=error",
	}
}

// Serve is a registry for set on a loopback port, serving each package's
// document (its package.json with where its tarball is and its digests)
// and the tarballs: enough for npm install and npx to resolve the packages
// by name, optional dependencies included. It returns the registry's URL.
func Serve(t testing.TB, set Set) string {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	docs := map[string][]byte{}
	for _, p := range set.All {
		data, err := os.ReadFile(p.File)
		if err != nil {
			t.Fatal(err)
		}
		tarball := "/-/" + filepath.Base(p.File)
		mux.HandleFunc("GET "+tarball, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(data) //nolint:errcheck // npm retries or fails the install
		})
		var version map[string]any
		if err := json.Unmarshal(p.raw, &version); err != nil {
			t.Fatal(err)
		}
		sha := sha1.Sum(data)
		sum := sha512.Sum512(data)
		version["dist"] = map[string]any{
			"tarball":   srv.URL + tarball,
			"shasum":    hex.EncodeToString(sha[:]),
			"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:]),
		}
		doc, err := json.Marshal(map[string]any{
			"name":      p.Name,
			"dist-tags": map[string]string{"latest": p.Version},
			"versions":  map[string]any{p.Version: version},
		})
		if err != nil {
			t.Fatal(err)
		}
		docs[p.Name] = doc
	}
	// npm asks for a scoped package as /@scope%2fname: the path arrives
	// decoded.
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		doc, ok := docs[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.Error(w, `{"error":"not found"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(doc) //nolint:errcheck // npm retries or fails the install
	})
	return srv.URL + "/"
}
