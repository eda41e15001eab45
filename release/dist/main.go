// Command dist builds a release of aep-kimi: for each platform the three
// binaries in one archive (tar.gz, zip for Windows) with a CycloneDX SBOM
// of what they link, the SHA-256 checksums of it all, and the Homebrew
// formula that installs those archives and runs `aep-kimi up` as a
// service.
//
//	go run ./release/dist -o dist            # the five platforms
//	go run ./release/dist -o dist -platforms linux/amd64
//	go run ./release/dist -o DIR -binaries   # the binaries only, DIR/OS_ARCH/
//	go run ./release/dist -print-version
//
// It needs only the Go toolchain and git, and fetches nothing but Go
// modules. The same commit, version and Go build the same bytes: static
// binaries (CGO_ENABLED=0), -trimpath, the version, commit and date passed
// to the linker (the date is the commit's, or SOURCE_DATE_EPOCH), and the
// archives' times, owners and order fixed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Defaults.
const (
	// DefaultPlatforms are the release's targets.
	DefaultPlatforms = "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64"
	// DefaultURL is where the formula downloads the archives from; {{.Version}}
	// is the release's version.
	DefaultURL = "https://github.com/aep-kimi/aep-kimi/releases/download/v{{.Version}}"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dist", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "output directory (created; files of the same names are replaced)")
	version := fs.String("version", "", "release version, X.Y.Z[-pre] (default $AEP_KIMI_VERSION, else git describe of a v* tag, else 0.0.0-dev.COMMIT)")
	platforms := fs.String("platforms", DefaultPlatforms, "comma-separated GOOS/GOARCH targets")
	url := fs.String("url", DefaultURL, "the archives' download directory, for the formula")
	binaries := fs.Bool("binaries", false, "build the binaries only, into -o/GOOS_GOARCH/")
	printVersion := fs.Bool("print-version", false, "print the version a release would have, and exit")
	keep := fs.String("keep-binaries", "", "also keep the archives' binaries, in DIR/GOOS_GOARCH/ (release/npm.sh can package them: $AEP_KIMI_DIST_BINARIES)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	fail := func(err error) int {
		fmt.Fprintf(stderr, "dist: %v\n", err)
		return 1
	}
	root, err := moduleRoot()
	if err != nil {
		return fail(err)
	}
	src, err := readSource(ctx, root, *version, getenv)
	if err != nil {
		return fail(err)
	}
	if *printVersion {
		fmt.Fprintln(stdout, src.Version)
		return 0
	}
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: dist -o DIR [-version V] [-platforms LIST] [-binaries] [-keep-binaries DIR]")
		return 2
	}
	targets, err := parsePlatforms(*platforms)
	if err != nil {
		fmt.Fprintf(stderr, "dist: %v\n", err)
		return 2
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		return fail(err)
	}
	if *keep != "" {
		if *keep, err = filepath.Abs(*keep); err != nil {
			return fail(err)
		}
	}
	r := release{src: src, root: root, out: dir, url: *url, log: log, keep: *keep}
	if *binaries {
		for _, p := range targets {
			if _, err := r.build(ctx, p, filepath.Join(dir, p.dir())); err != nil {
				return fail(err)
			}
		}
		return 0
	}
	start := time.Now()
	files, err := r.make(ctx, targets)
	if err != nil {
		return fail(err)
	}
	log.Info("release built", "version", src.Version, "dir", dir, "files", len(files), "took", time.Since(start).Round(time.Millisecond))
	for _, f := range files {
		fmt.Fprintln(stdout, f)
	}
	return 0
}

// moduleRoot is the main module's directory: the release is built from
// it wherever dist runs.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module "+module+"\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the aep-kimi module")
		}
		dir = parent
	}
}
