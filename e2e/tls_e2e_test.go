// TLS as documented: certificate files, the posture off loopback, and
// `up` over TLS, with real listeners and clients.

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/stacktest"
	"github.com/aep-kimi/aep-kimi/internal/testkit/tlstest"
)

// docs/team.md's TLS commands: a relay serving its own certificate
// (--tls-cert, --tls-key), an adapter publishing to it over https/wss with
// the CA in AEP_RELAY_CA, and `tail`, `pending` and `respond` reading and
// answering over it with --ca. Without --ca a client fails at once with one
// line naming the unknown authority. Replaced certificate files are served
// from the next handshake on.
func TestE2ETLSCertFiles(t *testing.T) {
	t.Parallel()
	bin := stacktest.Binaries(t)
	ca := tlstest.NewCA(t, "aep-kimi e2e CA")
	dir := t.TempDir()
	files := ca.WriteFiles(t, dir)
	hc := stacktest.TlsClient(ca)

	st := &stacktest.Stack{Home: t.TempDir(), Token: "e2e-" + aep.NewID()}
	rport := netaddr.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", rport)
	st.RelayURL = "https://" + addr
	st.Relay = stacktest.StartTLSDaemon(t, st.RelayURL, hc, []string{"AEP_TOKEN=" + st.Token, "AEP_HOME=" + st.Home},
		"relay", "--listen", addr, "--tls-cert", files.Cert, "--tls-key", files.Key)
	st.WithAdapter(t, "AEP_RELAY_CA="+files.CA, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=45000", "AEP_CAPTURE=redacted")

	session := "tls-" + strings.ToLower(aep.NewID())
	stacktest.Reply(t, st.Hook(t, map[string]any{"hook_event_name": "SessionStart", "session_id": session, "cwd": filepath.Join(dir, "tls-shop"), "source": "startup"}))
	held := st.HeldGate(t, session, "call_1", "rm -rf build")

	// A client that waits longer than this is retrying what cannot work.
	client := func(args ...string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "aep-kimi"), args...)
		cmd.Env = append(stacktest.CleanEnv(st.Home), "AEP_TOKEN="+st.Token, "COLUMNS=120")
		return proctest.Run(t, cmd)
	}
	var out string
	if !poll.Until(30*time.Second, func() bool {
		var code int
		code, out = client("tail", "--relay", st.RelayURL, "--ca", files.CA, "--from", "all", "--once", "--state", "none")
		return code == 0 && strings.Contains(out, "tls-shop") && strings.Contains(out, "rm -rf build")
	}) {
		t.Fatalf("tail --ca over https never showed the session and its request:\n%s", out)
	}
	// A wss:// URL names the same relay.
	if code, out := client("tail", "--relay", "wss://"+addr, "--ca", files.CA, "--from", "all", "--once", "--state", "none"); code != 0 || !strings.Contains(out, "tls-shop") {
		t.Errorf("tail --relay wss://: exit %d:\n%s", code, out)
	}
	if code, out := client("pending", "--relay", st.RelayURL, "--ca", files.CA); code != 0 || !strings.Contains(out, "rm -rf build") {
		t.Fatalf("pending --ca: exit %d:\n%s", code, out)
	}
	if code, out := client("healthz", "--ca", files.CA, st.RelayURL+"/healthz"); code != 0 {
		t.Errorf("healthz --ca: exit %d:\n%s", code, out)
	}
	if code, out := client("healthz", st.RelayURL+"/healthz"); code != 1 || !strings.Contains(out, "unknown authority") {
		t.Errorf("healthz without --ca: exit %d, want 1 naming the unknown authority:\n%s", code, out)
	}

	// Without the CA every client refuses the relay's certificate, at once
	// and in one line.
	for _, args := range [][]string{
		{"tail", "--relay", st.RelayURL, "--from", "all", "--state", "none"}, // following: no retry loop either
		{"pending", "--relay", st.RelayURL},
		{"respond", "--relay", st.RelayURL, "--option", "deny", session},
	} {
		start := time.Now()
		code, out := client(args...)
		msg := strings.TrimSuffix(out, "\n")
		if code != 1 || strings.Contains(msg, "\n") || !strings.Contains(msg, "unknown authority") || !strings.Contains(msg, "--ca") || strings.Contains(msg, "panic") {
			t.Errorf("%s without --ca: exit %d, want 1 and one line naming the unknown authority and --ca:\n%s", args[0], code, out)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%s without --ca took %s: a certificate failure is not worth retrying", args[0], took)
		}
	}
	if code, out := client("tail", "--relay", st.RelayURL, "--ca", filepath.Join(dir, "missing.pem"), "--once"); code != 2 || !strings.Contains(out, "--ca") {
		t.Errorf("tail with a missing --ca file: exit %d, want 2:\n%s", code, out)
	}

	if code, out := client("respond", "--relay", st.RelayURL, "--ca", files.CA, "--option", "deny", session); code != 0 {
		t.Fatalf("respond --ca: exit %d:\n%s", code, out)
	}
	if !stacktest.Denies(stacktest.Reply(t, held)) {
		t.Fatal("the gate answered over wss did not deny")
	}

	// Renewal: new files, and the next handshake gets the new certificate
	// (no restart).
	before := stacktest.ServedLeaf(t, addr, ca.Pool())
	certPEM, keyPEM := ca.Leaf(t, "renewed.example")
	tlstest.Write(t, files.Key, keyPEM)
	tlstest.Write(t, files.Cert, certPEM)
	after := stacktest.ServedLeaf(t, addr, ca.Pool())
	if after.Equal(before) || !strings.Contains(strings.Join(after.DNSNames, ","), "renewed.example") {
		t.Fatalf("after replacing the files the relay served %v, want the renewed certificate", after.DNSNames)
	}
	if !poll.Until(5*time.Second, func() bool { return strings.Contains(st.Relay.Logs.String(), "TLS certificate reloaded") }) {
		t.Errorf("the reload is not in the relay's log:\n%s", st.Relay.Logs)
	}
	// The emitter's socket, opened before, still carries events.
	stacktest.Reply(t, st.Hook(t, map[string]any{"hook_event_name": "SessionStart", "session_id": session + "-2", "cwd": filepath.Join(dir, "after-renewal"), "source": "startup"}))
	if !poll.Until(30*time.Second, func() bool {
		_, out = client("tail", "--relay", st.RelayURL, "--ca", files.CA, "--from", "all", "--once", "--state", "none")
		return strings.Count(out, "session started") == 2
	}) {
		t.Fatalf("no event after the renewal:\n%s", out)
	}
}

// Off loopback a relay serves TLS or says a TLS proxy fronts it; only then
// is the proxy's X-Forwarded-Proto believed. Under TLS the page's answers
// carry HSTS and Secure cookies; on plain loopback, the default, neither,
// whatever a forged header says.
func TestE2ETLSPosture(t *testing.T) {
	t.Parallel()
	stacktest.Binaries(t)
	home := t.TempDir()
	const token = "0123456789abcdef-tls-posture"
	port := fmt.Sprintf("%d", netaddr.FreePort(t))
	for _, c := range []struct {
		name string
		Env  []string
		args []string
	}{
		{"relay, non-loopback listen", []string{"AEP_TOKEN=" + token}, []string{"relay", "--listen", "0.0.0.0:" + port}},
		{"relay --public", []string{"AEP_TOKEN=" + token, "AEP_PORT=" + port}, []string{"relay", "--public"}},
		{"up --public", []string{"AEP_TOKEN=" + token}, []string{"up", "--public", "--relay-listen", "0.0.0.0:" + port, "--web=false"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := stacktest.RunRefused(t, stacktest.CleanEnv(home, c.Env...), c.args...)
			if !strings.Contains(msg, "needs TLS") || !strings.Contains(msg, "--behind-proxy") {
				t.Fatalf("stderr %q does not say TLS is needed and how", msg)
			}
		})
	}
	if msg := stacktest.RunRefused(t, stacktest.CleanEnv(home), "relay", "--tls-cert", filepath.Join(home, "relay.crt")); !strings.Contains(msg, "--tls-key") {
		t.Errorf("--tls-cert alone: %q", msg)
	}

	// Plain loopback: the default, unchanged; a forged X-Forwarded-Proto
	// changes nothing.
	plainPort := netaddr.FreePort(t)
	plain := fmt.Sprintf("http://127.0.0.1:%d", plainPort)
	stacktest.StartDaemon(t, plain, stacktest.CleanEnv(t.TempDir(), "AEP_TOKEN="+token), "relay", "--listen", fmt.Sprintf("127.0.0.1:%d", plainPort))
	if hsts, secure := stacktest.SecureAnswer(t, stacktest.Login(t, http.DefaultClient, plain, plain, token, nil)); hsts || secure {
		t.Errorf("plain loopback: HSTS %v, Secure cookie %v, want neither", hsts, secure)
	}
	forged := map[string]string{"X-Forwarded-Proto": "https"}
	if hsts, secure := stacktest.SecureAnswer(t, stacktest.Login(t, http.DefaultClient, plain, plain, token, forged)); hsts || secure {
		t.Errorf("plain loopback, forged X-Forwarded-Proto: HSTS %v, Secure cookie %v, want neither", hsts, secure)
	}

	// Behind a proxy, off loopback: it starts, and believes the proxy.
	ip := netaddr.NonLoopbackIPv4(t)
	proxiedPort := netaddr.FreePort(t)
	proxied := fmt.Sprintf("http://%s:%d", ip, proxiedPort)
	stacktest.StartDaemon(t, proxied, stacktest.CleanEnv(t.TempDir(), "AEP_TOKEN="+token), "relay", "--listen", fmt.Sprintf("%s:%d", ip, proxiedPort), "--behind-proxy")
	httpsOrigin := "https" + strings.TrimPrefix(proxied, "http")
	if hsts, secure := stacktest.SecureAnswer(t, stacktest.Login(t, http.DefaultClient, proxied, httpsOrigin, token, forged)); !hsts || !secure {
		t.Errorf("behind a proxy that says https: HSTS %v, Secure cookie %v, want both", hsts, secure)
	}

	// Its own TLS: HSTS and Secure cookies.
	ca := tlstest.NewCA(t, "posture CA")
	files := ca.WriteFiles(t, t.TempDir())
	hc := stacktest.TlsClient(ca)
	tlsAddr := fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	secureBase := "https://" + tlsAddr
	stacktest.StartTLSDaemon(t, secureBase, hc, stacktest.CleanEnv(t.TempDir(), "AEP_TOKEN="+token), "relay", "--listen", tlsAddr, "--tls-cert", files.Cert, "--tls-key", files.Key)
	if hsts, secure := stacktest.SecureAnswer(t, stacktest.Login(t, hc, secureBase, secureBase, token, nil)); !hsts || !secure {
		t.Errorf("TLS: HSTS %v, Secure cookie %v, want both", hsts, secure)
	}
}

// `up` serving TLS: its adapter publishes to its relay over TLS, trusting
// exactly the certificate the relay serves, and a client with --ca reads it.
func TestE2EUpTLS(t *testing.T) {
	t.Parallel()
	bin := stacktest.Binaries(t)
	ca := tlstest.NewCA(t, "up CA")
	files := ca.WriteFiles(t, t.TempDir())
	st := &stacktest.Stack{Home: t.TempDir(), Token: "e2e-" + aep.NewID()}
	raddr, aaddr := fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t)), fmt.Sprintf("127.0.0.1:%d", netaddr.FreePort(t))
	st.RelayURL, st.HookTo = "https://"+raddr, "http://"+aaddr
	st.Relay = stacktest.StartDaemon(t, st.HookTo, stacktest.CleanEnv(st.Home, "AEP_TOKEN="+st.Token), "up",
		"--relay-listen", raddr, "--adapter-listen", aaddr, "--web=false", "--tls-cert", files.Cert, "--tls-key", files.Key)
	session := "uptls-" + strings.ToLower(aep.NewID())
	stacktest.Reply(t, st.Hook(t, map[string]any{"hook_event_name": "SessionStart", "session_id": session, "cwd": filepath.Join(st.Home, "up-shop"), "source": "startup"}))
	var out string
	if !poll.Until(30*time.Second, func() bool {
		cmd := exec.Command(filepath.Join(bin, "aep-kimi"), "tail", "--relay", st.RelayURL, "--ca", files.CA, "--from", "all", "--once", "--state", "none")
		cmd.Env = append(stacktest.CleanEnv(st.Home), "AEP_TOKEN="+st.Token)
		_, out = proctest.Run(t, cmd)
		return strings.Contains(out, "uptls-") && strings.Contains(out, "session started")
	}) {
		t.Fatalf("the session up's adapter published never reached its TLS relay:\n%s\n%s", out, st.Relay.Logs)
	}
	for _, want := range []string{"relay=wss://", "relay    https://"} {
		if !strings.Contains(st.Relay.Logs.String(), want) {
			t.Errorf("up's output lacks %q:\n%s", want, st.Relay.Logs)
		}
	}
}
