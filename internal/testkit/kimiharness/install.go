package kimiharness

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/testkit/targz"
	"github.com/aep-kimi/aep-kimi/internal/testkit/usercache"
)

// The versions the end-to-end suite is verified against. Kimi 2.1.0 needs
// Node 22 (Node 20 lacks zlib's zstd exports it imports at start-up).
const (
	KimiVersion    = "2.1.0"
	KimiPackage    = "@moonshot-ai/kimi-code"
	NodeVersion    = "22.23.5"
	nodeMinMajor   = 22
	installLock    = ".install.lock"
	installStamp   = ".installed"
	kimiEntryPoint = "node_modules/@moonshot-ai/kimi-code/dist/main.mjs"
)

// CacheDir is where Bin installs Node and kimi: $AEP_KIMI_CACHE, else a
// directory per pinned version under the user cache (~/.cache/aep-kimi).
func CacheDir() string {
	return usercache.Dir(EnvCache, "kimi-code-"+KimiVersion+"-node-"+NodeVersion)
}

// Bin returns the path of a runnable kimi: $KIMI_BIN as is, else the pinned
// install in CacheDir, installed on first use.
func Bin(ctx context.Context) (string, error) {
	// Node skips its compile cache without a word when it cannot write
	// there; made here, it is there for every test kimi from the first.
	if err := os.MkdirAll(compileCacheDir(), 0o755); err != nil {
		return "", fmt.Errorf("node compile cache: %w", err)
	}
	if err := writeLoginShell(); err != nil {
		return "", fmt.Errorf("kimi login shell: %w", err)
	}
	if b := os.Getenv(EnvBin); b != "" {
		return b, nil
	}
	return Install(ctx, CacheDir())
}

// Install puts Node and the pinned kimi-code into dir, once, and returns the
// path of dir/bin/kimi, a wrapper that runs kimi with that Node. It holds an
// exclusive lock on dir while it checks and installs, so test packages
// running in parallel install once and never see half an install. It needs
// npm on PATH; both packages come from the npm registry.
func Install(ctx context.Context, dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("kimi install dir: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, installLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("kimi install lock: %w", err)
	}
	defer lock.Close() // closing releases the lock
	if err := safefile.Lock(lock); err != nil {
		return "", fmt.Errorf("kimi install lock: %w", err)
	}
	wrapper := filepath.Join(dir, "bin", "kimi")
	// The stamp is written last, once the wrapper ran and said its version,
	// so checking it spares every test starting Node just to ask.
	stamp := filepath.Join(dir, installStamp)
	if b, err := os.ReadFile(stamp); err == nil && string(b) == stampText() {
		if _, err := os.Stat(wrapper); err == nil {
			return wrapper, nil
		}
	}
	if v, err := version(ctx, wrapper, "--version"); err == nil && v == KimiVersion {
		return wrapper, atomicfile.Write(stamp, []byte(stampText()), atomicfile.Options{Perm: 0o644})
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("installing kimi %s needs npm on PATH: %w", KimiVersion, err)
	}
	node, err := installNode(ctx, dir)
	if err != nil {
		return "", err
	}
	if err := installKimi(ctx, dir, node); err != nil {
		return "", err
	}
	script := fmt.Sprintf("#!/bin/sh\n# kimi-code %s on Node %s, installed by the aep-kimi test harness.\nPATH=%s:$PATH\nexport PATH\nexec %s %s \"$@\"\n",
		KimiVersion, NodeVersion, shellQuote(filepath.Dir(node)), shellQuote(node), shellQuote(filepath.Join(dir, "kimi", kimiEntryPoint)))
	if err := os.MkdirAll(filepath.Dir(wrapper), 0o755); err != nil {
		return "", err
	}
	if err := atomicfile.Write(wrapper, []byte(script), atomicfile.Options{Perm: 0o755}); err != nil {
		return "", err
	}
	v, err := version(ctx, wrapper, "--version")
	if err != nil {
		return "", fmt.Errorf("installed kimi does not run: %w", err)
	}
	if v != KimiVersion {
		return "", fmt.Errorf("installed kimi reports version %q, want %s", v, KimiVersion)
	}
	return wrapper, atomicfile.Write(stamp, []byte(stampText()), atomicfile.Options{Perm: 0o644})
}

// stampText is the install stamp's content for the pinned versions.
func stampText() string {
	return KimiPackage + "@" + KimiVersion + " node@" + NodeVersion + "\n"
}

// Node returns the Node that runs kimiBin when it is a harness install, else
// "node" from PATH.
func Node(kimiBin string) string {
	n := filepath.Join(filepath.Dir(kimiBin), "..", "node", "bin", "node")
	if _, err := os.Stat(n); err == nil {
		return n
	}
	return "node"
}

// installNode returns a Node of the pinned version in dir/node, fetching the
// npm package that carries the official binary for this platform; where no
// such package exists it falls back to a Node 22 or later from PATH.
func installNode(ctx context.Context, dir string) (string, error) {
	node := filepath.Join(dir, "node", "bin", "node")
	if v, err := version(ctx, node, "--version"); err == nil && v == "v"+NodeVersion {
		return node, nil
	}
	pkg, ok := nodePackage()
	if !ok {
		return systemNode(ctx)
	}
	tmp, err := os.MkdirTemp(dir, "node-download-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	out, err := run(ctx, tmp, nil, "npm", "pack", "--silent", pkg+"@"+NodeVersion)
	if err != nil {
		return "", fmt.Errorf("fetching %s@%s from npm: %w", pkg, NodeVersion, err)
	}
	lines := strings.Fields(out)
	if len(lines) == 0 {
		return "", fmt.Errorf("npm pack %s printed no file name", pkg)
	}
	unpacked := filepath.Join(tmp, "node")
	if err := untarGz(filepath.Join(tmp, lines[len(lines)-1]), unpacked); err != nil {
		return "", fmt.Errorf("unpacking %s: %w", pkg, err)
	}
	if err := os.RemoveAll(filepath.Join(dir, "node")); err != nil {
		return "", err
	}
	if err := os.Rename(unpacked, filepath.Join(dir, "node")); err != nil {
		return "", err
	}
	if v, err := version(ctx, node, "--version"); err != nil || v != "v"+NodeVersion {
		return "", fmt.Errorf("node from %s@%s reports %q: %v", pkg, NodeVersion, v, err)
	}
	return node, nil
}

// nodePackage names the npm package holding the Node binary for this
// platform.
func nodePackage() (string, bool) {
	arch := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if arch == "" || (runtime.GOOS != "linux" && runtime.GOOS != "darwin") {
		return "", false
	}
	return "node-" + runtime.GOOS + "-" + arch, true
}

func systemNode(ctx context.Context) (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("no Node package for %s/%s and no node on PATH: %w", runtime.GOOS, runtime.GOARCH, err)
	}
	v, err := version(ctx, node, "--version")
	if err != nil {
		return "", err
	}
	major, _ := strconv.Atoi(strings.SplitN(strings.TrimPrefix(v, "v"), ".", 2)[0])
	if major < nodeMinMajor {
		return "", fmt.Errorf("kimi %s needs Node %d or later; %s is %s", KimiVersion, nodeMinMajor, node, v)
	}
	return node, nil
}

// installKimi installs the pinned kimi-code into dir/kimi with node first on
// PATH, so npm and any install script run on that Node.
func installKimi(ctx context.Context, dir, node string) error {
	prefix := filepath.Join(dir, "kimi")
	if err := os.MkdirAll(prefix, 0o755); err != nil {
		return err
	}
	manifest := filepath.Join(prefix, "package.json")
	if _, err := os.Stat(manifest); errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(manifest, []byte(`{"private": true}`+"\n"), 0o644); err != nil {
			return err
		}
	}
	env := append(os.Environ(), "PATH="+filepath.Dir(node)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if _, err := run(ctx, prefix, env, "npm", "install", "--prefix", prefix, "--save-exact", "--no-audit", "--no-fund",
		"--loglevel=error", KimiPackage+"@"+KimiVersion); err != nil {
		return fmt.Errorf("npm install %s@%s: %w", KimiPackage, KimiVersion, err)
	}
	return nil
}

// version runs bin with arg and returns its trimmed output.
func version(ctx context.Context, bin, arg string) (string, error) {
	if _, err := os.Stat(bin); err != nil {
		return "", err
	}
	out, err := run(ctx, "", nil, bin, arg)
	return strings.TrimSpace(out), err
}

// run runs a command and returns its stdout; a failure carries its stderr.
func run(ctx context.Context, dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// untarGz unpacks an npm tarball into dst, dropping its top directory
// ("package/").
func untarGz(src, dst string) error {
	return targz.Walk(src, func(h *tar.Header, r io.Reader) (bool, error) {
		_, rel, ok := strings.Cut(filepath.ToSlash(h.Name), "/")
		if !ok || rel == "" {
			return true, nil
		}
		target := filepath.Join(dst, filepath.FromSlash(rel))
		if !strings.HasPrefix(target, filepath.Clean(dst)+string(filepath.Separator)) {
			return false, fmt.Errorf("tar entry %q leaves the target directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return false, err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return false, err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o755|0o644)
			if err != nil {
				return false, err
			}
			_, err = io.Copy(out, r)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return false, err
			}
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return false, err
			}
			if err := os.Symlink(h.Linkname, target); err != nil {
				return false, err
			}
		}
		return true, nil
	})
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
