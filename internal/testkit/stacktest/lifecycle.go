package stacktest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/poll"
	"github.com/aep-kimi/aep-kimi/internal/testkit/syncbuf"
)

// MaxEndLatency is the bound: no session outlives its Kimi process
// on the stream by more than this.
const MaxEndLatency = 5 * time.Second

// KimiRun is a Kimi CLI environment against the mock provider, with every
// Hook registered to the stack's kimi-hook.
type KimiRun struct {
	Kimi, Home, Work string
	// Mock is the model provider the run's Kimi calls.
	Mock *kimiharness.Mock
}

func NewKimiRun(t *testing.T, st *Stack, script any) *KimiRun {
	t.Helper()
	kimi := kimiharness.Require(t)
	b, _ := json.Marshal(script)
	path := filepath.Join(t.TempDir(), "script.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	mock := kimiharness.StartMock(t, path)
	k := &KimiRun{Kimi: kimi, Home: filepath.Join(t.TempDir(), "kimi-home"), Work: t.TempDir(), Mock: mock}
	kimiharness.WriteConfig(t, k.Home, mock.Port, st.HookCmd(t))
	return k
}

// Start runs `kimi -p PROMPT ARGS...` without waiting for it.
func (k *KimiRun) Start(t *testing.T, prompt string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(k.Kimi, append([]string{"-p", prompt}, args...)...)
	cmd.Dir, cmd.Env = k.Work, kimiharness.Env(k.Home)
	cmd.Stdout, cmd.Stderr = &syncbuf.Buffer{}, &syncbuf.Buffer{}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		kimiharness.LogLaunch("print", k.Home, started, cmd.ProcessState)
	})
	return cmd
}

// Run runs `kimi -p` to its exit and returns the exit time.
func (k *KimiRun) Run(t *testing.T, prompt string, args ...string) time.Time {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := kimiharness.Print(ctx, k.Kimi, k.Home, k.Work, prompt, args...)
	exited := time.Now()
	if err != nil {
		t.Fatalf("kimi -p: %v\n%s", err, out)
	}
	return exited
}

// WaitEnded waits for the n-th session.ended in the only session log and
// returns the log's events and how long after since it appeared.
func (st *Stack) WaitEnded(t *testing.T, n int, since time.Time) ([]*aep.Event, time.Duration) {
	t.Helper()
	var ev []*aep.Event
	var took time.Duration
	if !poll.Until(time.Until(since.Add(MaxEndLatency+10*time.Second)), func() bool {
		for _, b := range st.SessionLogs(t) {
			if ev = ParseLines(t, WholeLines(b)); TypeCounts(ev)["session.ended"] >= n {
				took = time.Since(since)
				return true
			}
		}
		return false
	}) {
		t.Fatalf("no session.ended #%d %s after the exit: %v", n, time.Since(since), st.SessionLogs(t))
	}
	return ev, took
}

func LastEnd(t *testing.T, ev []*aep.Event) (reason, observed string) {
	t.Helper()
	var end *aep.Event
	for _, e := range ev {
		if e.Type == "session.ended" {
			end = e
		}
	}
	reason, _ = DataOf(end)["reason"].(string)
	observed, _ = end.ExtString(adapter.ExtObserved)
	return reason, observed
}

// ValidateLogAndRelay checks the session's log and the relay's replay of it
// with the stream validators (`aep-kimi validate`).
func (st *Stack) ValidateLogAndRelay(t *testing.T, session string) {
	t.Helper()
	name := adapter.LogFileName(session)
	ValidateWithCLI(t, filepath.Join(st.Home, "logs", "kimi-code", name))
	raw := st.SessionLogs(t)[name]
	st.SameOnRelay(t, raw, session)
	relayed := filepath.Join(t.TempDir(), "relay.jsonl")
	var lines []string
	for _, l := range st.RelayEvents(t, session) {
		lines = append(lines, string(l))
	}
	if err := os.WriteFile(relayed, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ValidateWithCLI(t, relayed)
}

// HostName is the host the adapter names in source URIs.
func (st *Stack) HostName(t *testing.T) string {
	t.Helper()
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}
