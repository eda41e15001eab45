// Package proctest runs programs for tests: a long-lived one the way the
// end-to-end tests run aep-kimi's daemons and the real servers they talk
// to (its output kept, its exit noticed, stopped gracefully, SIGTERM then a
// kill, when the test ends), and a command run to its end for its exit
// code and output.
package proctest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
	"github.com/aep-kimi/aep-kimi/internal/testkit/usercache"
)

// StopWait bounds a graceful stop: past it the process is killed and the
// test fails.
const StopWait = 10 * time.Second

// Proc is a running program.
type Proc struct {
	Cmd *exec.Cmd
	// Logs holds what it wrote to the standard output and error the caller
	// left unset.
	Logs *syncbuf.Buffer

	name string
	outs []*syncbuf.Buffer
	done chan struct{}
}

// Start starts cmd, named name in failures, and stops it when the test
// ends; a test that failed logs its output.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Proc {
	t.Helper()
	p := &Proc{Cmd: cmd, Logs: &syncbuf.Buffer{}, name: name, done: make(chan struct{})}
	for _, w := range []*io.Writer{&cmd.Stdout, &cmd.Stderr} {
		if *w == nil {
			*w = p.Logs
		}
		if b, ok := (*w).(*syncbuf.Buffer); ok && !slices.Contains(p.outs, b) {
			p.outs = append(p.outs, b)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { cmd.Wait(); close(p.done) }() //nolint:errcheck // the exit is read from ProcessState
	t.Cleanup(func() {
		select {
		case <-p.done:
			if t.Failed() { // it died on its own: what it said is the diagnosis
				t.Logf("%s had exited (%v); its output:\n%s", name, cmd.ProcessState, p.output())
			}
		default:
			p.Stop(t)
			if t.Failed() {
				t.Logf("%s output:\n%s", name, p.output())
			}
		}
	})
	return p
}

// output is what it wrote into buffers: Logs, and the caller's own
// buffers for its standard output or error.
func (p *Proc) output() string {
	var b strings.Builder
	for _, o := range p.outs {
		b.WriteString(o.String())
	}
	return b.String()
}

// Exited is closed once the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Stop sends SIGTERM and waits for the exit: a graceful stop. One still
// running after StopWait is killed, and the test fails.
func (p *Proc) Stop(t testing.TB) {
	select {
	case <-p.done:
		return
	default:
	}
	p.Cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // it may be gone
	select {
	case <-p.done:
	case <-time.After(StopWait):
		p.Kill()
		t.Errorf("%s did not stop on SIGTERM within %s", p.name, StopWait)
	}
}

// Kill sends SIGKILL (a crash) and waits for the exit.
func (p *Proc) Kill() {
	p.Cmd.Process.Kill() //nolint:errcheck // it may be gone
	<-p.done
}

// Await waits until cond holds, and fails the test if the process exits
// first or cond does not hold within d; what names what was awaited.
func (p *Proc) Await(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	exited := false
	ok := poll.Until(d, func() bool {
		select {
		case <-p.done:
			exited = true
			return true
		default:
		}
		return cond()
	})
	switch {
	case exited:
		t.Fatalf("%s exited (%v) before %s; its output:\n%s", p.name, p.Cmd.ProcessState, what, p.output())
	case !ok:
		t.Fatalf("%s: no %s within %s; its output:\n%s", p.name, what, d, p.output())
	}
}

// Answers reports whether a GET of url answers 200: a server's health
// endpoint, while Await waits for it to come up.
func Answers(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Run runs cmd to its end and returns its exit code (-1 when a signal
// ended it) and its standard output and error, combined; a command that
// could not run at all fails the test.
func Run(t testing.TB, cmd *exec.Cmd) (int, string) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	}
	t.Fatalf("%s: %v\n%s", filepath.Base(cmd.Path), err, out)
	return -1, ""
}

// Require finds a program a test needs on the PATH. Without it the test
// is skipped, with how to install it, but fails under CI, whose .ci/run
// installs it.
func Require(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but %s is not installed (.ci/run installs it: %s)", name, install)
		}
		t.Skipf("skipping: no %s on the PATH (%s)", name, install)
	}
	return p
}

// GoBuild builds the Go packages pkgs in dir (a module's directory) into out:
// a file for one program, a directory ending in a separator for several.
func GoBuild(ctx context.Context, dir, out string, pkgs ...string) error {
	cmd := exec.CommandContext(ctx, "go", append([]string{"build", "-o", out}, pkgs...)...)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, b)
	}
	return nil
}

// Tool is a program a test runs (Jaeger, Pebble), pinned by a Go module of
// its own under tools/ and built once into the user cache.
type Tool struct {
	// Name is the binary's name; Version the release the module pins.
	Name, Version string
	// EnvCache names the variable that moves the cache directory.
	EnvCache string
	// Module is the tools module's directory under the repository root;
	// Pkg the package built from it.
	Module, Pkg string
	// Timeout bounds one build.
	Timeout time.Duration
}

// CacheDir is where Bin keeps the binary: $EnvCache, else a directory per
// pinned version under the user cache.
func (tl Tool) CacheDir() string { return usercache.Dir(tl.EnvCache, tl.Name+"-"+tl.Version) }

// Bin returns the binary, building it into CacheDir first when it is not
// there yet. An exclusive lock on the directory makes parallel test
// packages build it once.
func (tl Tool) Bin(ctx context.Context) (string, error) {
	root, err := fixtures.ModuleRoot()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, tl.Timeout)
	defer cancel()
	dir := tl.CacheDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, tl.Name)
	lock, err := safefile.OpenFile(filepath.Join(dir, ".build.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := safefile.Lock(lock); err != nil {
		return "", err
	}
	defer safefile.Unlock(lock) //nolint:errcheck // closing releases it too
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tmp := bin + ".tmp"
	if err := GoBuild(ctx, filepath.Join(root, tl.Module), tmp, tl.Pkg); err != nil {
		return "", fmt.Errorf("building %s %s: %w", tl.Name, tl.Version, err)
	}
	return bin, os.Rename(tmp, bin)
}
