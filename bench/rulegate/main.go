// Command rulegate measures how long a held PreToolUse waits for its reply
// when a rule answers it, against the same gate answered by a command sent
// the moment the request appears (a bot standing in for the fastest
// person), in one run on loopback: the real relay (with the rules file in
// its home) and the real adapter with the gate on, as built binaries.
//
// The hook's leg is the adapter's /hook endpoint, posted directly as
// kimi-hook posts it, so the figures are the gate's round trip without the
// spawn (bench/hookrt measures that). The two variants alternate, on one
// session, so drift hits both alike.
//
// Usage: go run ./bench/rulegate [-n 300]
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/netaddr"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/wire"
	"github.com/aep-kimi/aep-kimi/rules"
)

const token = "rulegate-bench-token"

func main() {
	n := flag.Int("n", 300, "held calls per variant")
	nRules := flag.Int("rules", 1000, "rules in the file (the deciding one last)")
	flag.Parse()
	if err := run(*n, *nRules); err != nil {
		fmt.Fprintln(os.Stderr, "rulegate:", err)
		os.Exit(1)
	}
}

func run(n, nRules int) error {
	tmp, err := os.MkdirTemp("", "rulegate")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	root, err := fixtures.ModuleRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(tmp, "aep-kimi")
	if err := proctest.GoBuild(context.Background(), root, bin, "./cmd/aep-kimi"); err != nil {
		return err
	}
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(home, rules.FileName), rules.Encode(ruleBook(nRules)), 0o600); err != nil {
		return err
	}
	relayAddr, err := netaddr.Free()
	if err != nil {
		return err
	}
	adapterAddr, err := netaddr.Free()
	if err != nil {
		return err
	}
	env := append(os.Environ(), "AEP_TOKEN="+token, "AEP_HOME="+home)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	relay, err := daemon(ctx, bin, env, "relay", "--listen", relayAddr)
	if err != nil {
		return err
	}
	defer stop(relay)
	if err := waitUp("http://" + relayAddr + "/healthz"); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	adapterEnv := append(env, "AEP_KIMI_CONTROL=1", "AEP_ATTENTION_TIMEOUT_MS=30000")
	ad, err := daemon(ctx, bin, adapterEnv, "adapter", "--listen", adapterAddr, "--relay", "http://"+relayAddr)
	if err != nil {
		return err
	}
	defer stop(ad)
	if err := waitUp("http://" + adapterAddr + "/healthz"); err != nil {
		return fmt.Errorf("adapter: %w", err)
	}
	hookToken, err := os.ReadFile(filepath.Join(home, "kimi", "hook.token"))
	if err != nil {
		return err
	}
	h := hooker{url: "http://" + adapterAddr + "/hook", token: strings.TrimSpace(string(hookToken))}
	stopBot, err := startBot(ctx, "ws://"+relayAddr+"/socket")
	if err != nil {
		return err
	}
	defer stopBot()

	const session = "rulegate"
	if _, err := h.post(map[string]any{"hook_event_name": "SessionStart", "session_id": session, "source": "startup"}); err != nil {
		return err
	}
	variants := []struct{ name, command string }{
		{"answered by a rule (1 of the file's rules matches)", "echo ok"},
		{"answered by a command sent at once", "git status"},
	}
	results := make([][]time.Duration, len(variants))
	for i := 0; i < n+10; i++ {
		for v, variant := range variants {
			d, err := h.gate(session, fmt.Sprintf("call_%d_%d", i, v), variant.command)
			if err != nil {
				return fmt.Errorf("%s: %w", variant.name, err)
			}
			if i >= 10 { // warm-up discarded
				results[v] = append(results[v], d)
			}
		}
	}
	fmt.Printf("held PreToolUse -> reply on loopback, %d each, alternating; %d rules in the file\n\n", n, nRules)
	fmt.Println("| variant | p50 | p99 |")
	fmt.Println("|---|---|---|")
	for v, variant := range variants {
		fmt.Printf("| %s | %s | %s |\n", variant.name, ms(pct(results[v], 0.5)), ms(pct(results[v], 0.99)))
	}
	fmt.Printf("\nratio rule / command: p50 %.2f×, p99 %.2f×\n",
		float64(pct(results[0], 0.5))/float64(pct(results[1], 0.5)), float64(pct(results[0], 0.99))/float64(pct(results[1], 0.99)))
	return nil
}

// ruleBook is n rules, all on Bash, the one matching `echo ok` last, so the
// rule-answered variant pays the evaluation of all of them.
func ruleBook(n int) []rules.Rule {
	out := make([]rules.Rule, 0, n)
	for i := range n - 1 {
		out = append(out, rules.Rule{ID: fmt.Sprintf("r%d", i), Effect: rules.Allow, Tool: "Bash", Args: fmt.Sprintf("tool-%d *", i)})
	}
	return append(out, rules.Rule{ID: "echo", Effect: rules.Allow, Tool: "Bash", Args: "echo *"})
}

type hooker struct{ url, token string }

// gate posts a PreToolUse for command and returns how long the reply took;
// an allow is an empty reply.
func (h hooker) gate(session, call, command string) (time.Duration, error) {
	start := time.Now()
	out, err := h.post(map[string]any{"hook_event_name": "PreToolUse", "session_id": session, "tool_name": "Bash",
		"tool_call_id": call, "tool_input": map[string]any{"command": command}})
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if strings.Contains(out, "deny") {
		return 0, fmt.Errorf("denied: %s", out)
	}
	return d, nil
}

func (h hooker) post(payload map[string]any) (string, error) {
	b, _ := json.Marshal(payload)
	req, err := http.NewRequest(http.MethodPost, h.url, bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+h.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("hook: HTTP %d %s", resp.StatusCode, body)
	}
	return string(body), nil
}

// startBot answers every request no rule answered, the moment it sees it:
// one socket subscribed to the requests, its command sent on the same
// socket.
func startBot(ctx context.Context, url string) (func(), error) {
	h := http.Header{"Authorization": {"Bearer " + token}}
	c, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(16 << 20)
	hello := wire.NewHello(wire.RoleConsumer, wire.Identity{Agent: "bench-bot", Instance: "bench-bot/1"}, wire.Capabilities{})
	if err := c.Write(ctx, websocket.MessageText, wire.Encode(hello)); err != nil {
		return nil, err
	}
	filter, _ := json.Marshal(map[string]any{"type": "attention.requested"})
	if err := c.Write(ctx, websocket.MessageText, wire.Encode(&wire.Subscribe{ID: wire.ID("asks"), Filter: filter})); err != nil {
		return nil, err
	}
	bctx, cancel := context.WithCancel(ctx)
	go func() {
		for {
			_, b, err := c.Read(bctx)
			if err != nil {
				return
			}
			f, err := wire.Parse(b)
			if err != nil {
				continue
			}
			switch f := f.(type) {
			case *wire.Ping:
				_ = c.Write(bctx, websocket.MessageText, wire.PongFor(f))
			case wire.Event:
				ev, err := aep.ParseEvent(b)
				if err != nil || !strings.Contains(string(ev.Data), "git status") {
					continue
				}
				cmd, err := client.Respond(ev.Session, ev.ID, "allow", "")
				if err != nil {
					continue
				}
				cmd.Subject, cmd.Cause = ev.ID, ev.ID
				raw, err := cmd.Bytes()
				if err == nil {
					_ = c.Write(bctx, websocket.MessageText, raw)
				}
			}
		}
	}()
	return func() { cancel(); _ = c.CloseNow() }, nil
}

func daemon(ctx context.Context, bin string, env []string, args ...string) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	return cmd, cmd.Start()
}

func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
	}
}

func waitUp(url string) error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("did not come up")
}

func pct(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
