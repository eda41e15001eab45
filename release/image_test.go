//go:build linux

package release

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/internal/spool"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
)

// upWait bounds how long the image's entrypoint may take to answer
// /healthz (about a second on an idle machine).
const upWait = 60 * time.Second

// imageConfig is what the test reads of the built image: its OCI config
// and the health check only Docker's format carries.
type imageConfig struct {
	OCIv1 struct {
		Config struct {
			User       string
			Env        []string
			Entrypoint []string
			Cmd        []string
			WorkingDir string
			Volumes    map[string]struct{}
		} `json:"config"`
	}
	Docker struct {
		Config struct {
			Healthcheck *struct{ Test []string }
		} `json:"config"`
	}
}

// TestImage builds the image with release/image.sh and buildah (its own
// storage, Debian's vfs driver: no daemon, nothing pulled), then runs the
// image's entrypoint and command the way a container would, in the image's
// rootfs as the image's user with exactly the image's environment, until
// the relay and the adapter answer /healthz and the image's own health
// check passes.
func TestImage(t *testing.T) {
	buildah := requireTool(t, "buildah", "apt-get install buildah")
	chroot := requireTool(t, "chroot", "coreutils")
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the image test needs root on Linux (buildah's storage, chroot)")
		}
		t.Skip("the image test needs root on Linux (buildah's storage, chroot)")
	}
	dir := t.TempDir()
	tool := []string{buildah, "--root", filepath.Join(dir, "root"), "--runroot", filepath.Join(dir, "run"), "--storage-driver", "vfs"}
	bah := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(tool[0], append(tool[1:], args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return strings.TrimSpace(string(out))
	}

	const tag = "localhost/aep-kimi:test"
	build := exec.Command("bash", "image.sh", tag)
	build.Env = append(os.Environ(), "CONTAINER_TOOL="+strings.Join(tool, " "), "AEP_KIMI_VERSION=0.0.0-test")
	start := time.Now()
	if code, out := proctest.Run(t, build); code != 0 {
		t.Fatalf("image.sh exited %d:\n%s", code, out)
	}
	t.Logf("image built in %s, %s", time.Since(start).Round(time.Millisecond), bah("images", "--format", "{{.Size}}", tag))

	var img imageConfig
	if err := json.Unmarshal([]byte(bah("inspect", "--type", "image", tag)), &img); err != nil {
		t.Fatal(err)
	}
	cfg := img.OCIv1.Config
	if u := cfg.User; u == "" || u == "0" || strings.HasPrefix(u, "0:") || strings.HasPrefix(u, "root") {
		t.Errorf("the image runs as %q, want a non-root user", u)
	}
	home := envValue(cfg.Env, "AEP_HOME")
	if home == "" {
		t.Fatalf("the image sets no AEP_HOME: %q", cfg.Env)
	}
	if _, ok := cfg.Volumes[home]; !ok {
		t.Errorf("AEP_HOME %s is not a volume: %v", home, cfg.Volumes)
	}
	if hc := img.Docker.Config.Healthcheck; hc == nil || !slices.Equal(hc.Test, []string{"CMD", "/usr/local/bin/aep-kimi", "healthz"}) {
		t.Errorf("health check %+v, want aep-kimi healthz", hc)
	}

	ctr := bah("from", tag)
	rootfs := bah("mount", ctr)
	t.Cleanup(func() { bah("rm", ctr) })
	for _, bin := range []string{"aep-kimi", "kimi-hook", "aep-setup"} {
		if fi, err := os.Stat(filepath.Join(rootfs, "usr/local/bin", bin)); err != nil || fi.Mode()&0o111 == 0 {
			t.Errorf("%s in the image: %v", bin, err)
		} else if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
			t.Errorf("%s is owned by uid %d: the image's user could replace it", bin, st.Uid)
		}
	}
	if _, err := os.Lstat(filepath.Join(rootfs, "bin/sh")); err == nil {
		t.Error("the image has a shell: it is meant to hold the binaries alone")
	}
	pem, err := os.ReadFile(filepath.Join(rootfs, "etc/ssl/certs/ca-certificates.crt"))
	if err != nil || !x509.NewCertPool().AppendCertsFromPEM(pem) {
		t.Errorf("the image's CA bundle holds no certificate: %v", err)
	}

	// The container's command with its ports moved off the usual ones,
	// which a person's own up may hold on this machine.
	relay, adapterAddr, bridge := netaddr.FreeAddr(t), netaddr.FreeAddr(t), netaddr.FreeAddr(t)
	argv := append(append(slices.Clone(cfg.Entrypoint), cfg.Cmd...),
		"--relay-listen", relay, "--adapter-listen", adapterAddr, "--bridge-listen", bridge)
	up := exec.Command(chroot, append([]string{"--userspec=" + cfg.User, rootfs}, argv...)...)
	up.Env = cfg.Env
	up.Dir = "/"
	started := time.Now()
	p := proctest.Start(t, "the image's entrypoint", up)
	urls := []string{"http://" + relay + "/healthz", "http://" + adapterAddr + "/healthz"}
	p.Await(t, upWait, "/healthz of the relay and the adapter", func() bool {
		return proctest.Answers(urls[0]) && proctest.Answers(urls[1])
	})
	t.Logf("entrypoint answered /healthz after %s", time.Since(started).Round(time.Millisecond))

	// The health check's own binary, run in the image, on these ports.
	hc := exec.Command(chroot, append([]string{"--userspec=" + cfg.User, rootfs, cfg.Entrypoint[0], "healthz"}, urls...)...)
	hc.Env = cfg.Env
	if code, out := proctest.Run(t, hc); code != 0 {
		t.Errorf("aep-kimi healthz in the image exited %d:\n%s", code, out)
	}

	// What a host's kimi-hook reads from a shared AEP_HOME: the hook
	// token, the user's alone.
	tok := filepath.Join(rootfs, home, "kimi", "hook.token")
	fi, err := os.Stat(tok)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || strings.Split(cfg.User, ":")[0] != uidString(fi) {
		t.Errorf("hook token %v owned by %s, want 0600 owned by the image's user %s", fi.Mode(), uidString(fi), cfg.User)
	}

	// A host's kimi-hook (the image's own, run outside it) reaches the
	// adapter with the token from the shared home, as a volume shares it:
	// the session is logged there and nothing is left in the spool.
	kh := exec.Command(filepath.Join(rootfs, "usr/local/bin/kimi-hook"), "--daemon", "http://"+adapterAddr, "--home", filepath.Join(rootfs, home))
	kh.Stdin = strings.NewReader(`{"hook_event_name":"SessionStart","session_id":"img1","cwd":"/tmp","source":"startup"}`)
	if code, out := proctest.Run(t, kh); code != 0 || out != "" {
		t.Fatalf("kimi-hook exited %d: %q", code, out)
	}
	log, err := os.ReadFile(filepath.Join(rootfs, home, "logs", "kimi-code", adapter.LogFileName("img1")))
	if err != nil || !strings.Contains(string(log), `"type":"session.started"`) {
		t.Errorf("the adapter did not log the host's hook: %v %q", err, log)
	}
	if left, err := spool.List(spool.Dir(filepath.Join(rootfs, home))); err != nil || len(left) != 0 {
		t.Errorf("the hook was spooled, not delivered: %v %v", left, err)
	}

	p.Stop(t)
	if !p.Cmd.ProcessState.Success() {
		t.Errorf("up exited %v on SIGTERM", p.Cmd.ProcessState)
	}
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// uidString is the owner of fi, as a numeric user spec names it.
func uidString(fi os.FileInfo) string {
	return strconv.FormatUint(uint64(fi.Sys().(*syscall.Stat_t).Uid), 10)
}
