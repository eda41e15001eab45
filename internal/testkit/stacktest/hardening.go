package stacktest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// CleanEnv is the environment with every variable that names a token or a
// listen posture cleared, so the caller's shell cannot decide a case.
func CleanEnv(home string, extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "AEP_TOKEN", "AEP_TOKEN_FILE", "AEP_PUBLIC", "AEP_ALLOWED_HOSTS", "AEP_PORT", "AEP_HOME",
			"AEP_KIMI_ADDR", "AEP_KIMI_WEB_ADDR", "AEP_RELAY", "KIMI_CODE_HOME":
			continue
		}
		env = append(env, kv)
	}
	return append(env, append([]string{"AEP_HOME=" + home, "KIMI_CODE_HOME=" + filepath.Join(home, "kimi-code")}, extra...)...)
}

// RunRefused runs `aep-kimi ARGS` expecting it to refuse to start: exit 2
// with one line on stderr. A daemon that starts instead is killed after 10 s
// and the case fails.
func RunRefused(t *testing.T, env []string, args ...string) string {
	t.Helper()
	code, stderr := RunStopped(t, env, args...)
	msg := strings.TrimSuffix(stderr, "\n")
	if code != 2 || msg == "" || strings.Contains(msg, "\n") {
		t.Fatalf("aep-kimi %s: exit %d, want 2 with one line; stderr:\n%s", strings.Join(args, " "), code, stderr)
	}
	return msg
}

// RunStopped runs `aep-kimi ARGS` expecting it to stop by itself, and
// returns its exit code and standard error. A daemon still running after
// 10 s is killed and the case fails.
func RunStopped(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	bin := filepath.Join(Binaries(t), "aep-kimi") // built before the clock starts
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run() //nolint:errcheck // the exit code is the result
	if ctx.Err() != nil {
		t.Fatalf("aep-kimi %s started instead of refusing:\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// RawStatus sends one request with the given Host over a fresh connection
// and returns the status and body. extra is added to the headers.
func RawStatus(t *testing.T, addr, method, path, host, extra, body string) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\n%sContent-Length: %d\r\nConnection: close\r\n\r\n%s", method, path, host, extra, len(body), body)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("%s %s (Host %s): %v", method, path, host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}

// RssKB reads a process's resident set size (Linux).
func RssKB(t *testing.T, pid int) (int64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
