// Command hookrt measures the hook round trip as Kimi pays it: spawn the hook
// command through /bin/sh -c with the payload on stdin and wait for it to
// exit. It compares, in one run and against one real adapter on loopback:
//
//   - a trivial binary (/bin/true), the floor of spawning anything;
//   - a trivial Go binary (reads stdin, exits), the floor for a Go shim;
//   - kimi-hook, delivering to the adapter and waiting for its reply;
//   - a minimal Node shim of the same shape (read stdin, POST, print a
//     non-empty reply), what a JavaScript shim costs.
//
// With -base, a second kimi-hook (the previous release's) runs interleaved
// with the first on UserPromptSubmit, PreToolUse and PostToolUse, and the
// table gives each against it. Both run from copies written into the run's directory.
//
// With -sync 1,4,8 it measures instead what syncing the log before the ack
// (AEP_LOG_SYNC=always) adds to a hook when that many spawners run hooks at
// once, against acking once written (interval), and how many log syncs a
// hook costs: the group commit shares one among the hooks that arrive while
// one runs.
//
// Usage: go run ./bench/hookrt [-n 300] [-node PATH] [-hook PATH] [-base PATH]
//
//	go run ./bench/hookrt -sync 1,4,8 [-n 200] [-hook PATH]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/adapter"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/internal/testkit/fixtures"
	"github.com/aep-kimi/aep-kimi/internal/testkit/kimiharness"
	"github.com/aep-kimi/aep-kimi/internal/testkit/proctest"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// roundSeed fixes the rounds' orders, so a run can be repeated as it was.
const roundSeed = 0x686f6f6b

const payload = `{"hook_event_name":"UserPromptSubmit","session_id":"bench","cwd":"/w","client_type":"kimi_code_cli","prompt":[{"type":"text","text":"run the probe"}],"is_steer":false}`

// prePayload is the hook the control gate may hold: kimi-hook watches for
// Kimi's SIGTERM while it waits, which the other hooks do without. With
// control off the adapter answers it at once.
const prePayload = `{"hook_event_name":"PreToolUse","session_id":"bench","cwd":"/w","client_type":"kimi_code_cli","tool_name":"Bash","tool_input":{"command":"ls"},"tool_call_id":"call-1"}`

// postPayload is a fire-and-forget hook: kimi-hook writes it ahead to the
// spool, leaves Kimi's process group, delivers it and removes the record.
// Kimi waits for none of that; it is the CPU a tool's result costs.
const postPayload = `{"hook_event_name":"PostToolUse","session_id":"bench","cwd":"/w","client_type":"kimi_code_cli","tool_name":"Bash","tool_input":{"command":"ls"},"tool_call_id":"call-post","tool_output":"ok"}`

// nodeShim is the JavaScript baseline: the same job as kimi-hook, minus the
// spool: read stdin, POST it with the token, print a non-empty reply.
const nodeShim = `const http = require('http');
const [port, token] = process.argv.slice(2);
const chunks = [];
process.stdin.on('data', (c) => chunks.push(c)).on('end', () => {
  const body = Buffer.concat(chunks);
  const req = http.request({ host: '127.0.0.1', port, path: '/hook', method: 'POST', headers: {
    'Content-Type': 'application/json', 'Authorization': 'Bearer ' + token, 'Content-Length': body.length } }, (res) => {
    const out = [];
    res.on('data', (c) => out.push(c)).on('end', () => {
      const s = Buffer.concat(out).toString();
      if (s !== '{}') process.stdout.write(s);
      process.exit(0);
    });
  });
  req.on('error', () => process.exit(0));
  req.end(body);
});
`

const trivialGo = `package main

import (
	"io"
	"os"
)

func main() { io.Copy(io.Discard, os.Stdin) }
`

func main() {
	n := flag.Int("n", 300, "spawns per variant")
	nodeBin := flag.String("node", "", "node binary for the Node shim (default: the harness's Node 22, else node on PATH; none: no Node shim)")
	hookBin := flag.String("hook", "", "kimi-hook binary (default: built from ./cmd/kimi-hook)")
	baseBin := flag.String("base", "", "a baseline kimi-hook binary to run interleaved with -hook")
	spawners := flag.String("sync", "", "instead: what AEP_LOG_SYNC=always adds with this many spawners at once (comma-separated, e.g. 1,4,8), against interval")
	flag.Parse()
	var err error
	if *spawners != "" {
		err = runSync(*spawners, *n, *hookBin)
	} else {
		err = run(*n, *nodeBin, *hookBin, *baseBin)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hookrt:", err)
		os.Exit(1)
	}
}

func run(n int, nodeBin, hookBin, baseBin string) error {
	tmp, err := os.MkdirTemp("", "hookrt")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if hookBin, err = buildHook(tmp, hookBin); err != nil {
		return err
	}
	if hookBin, err = stage(tmp, "hook", hookBin); err != nil {
		return err
	}
	if baseBin != "" {
		if baseBin, err = stage(tmp, "base", baseBin); err != nil {
			return err
		}
	}
	trivial := filepath.Join(tmp, "trivial")
	src := filepath.Join(tmp, "trivial.go")
	if err := os.WriteFile(src, []byte(trivialGo), 0o600); err != nil {
		return err
	}
	if err := proctest.GoBuild(context.Background(), tmp, trivial, src); err != nil {
		return err
	}
	if nodeBin == "" {
		if k, err := kimiharness.Bin(context.Background()); err == nil {
			nodeBin = kimiharness.Node(k)
		} else {
			nodeBin = "node"
		}
	}
	shim := filepath.Join(tmp, "shim.js")
	if err := os.WriteFile(shim, []byte(nodeShim), 0o600); err != nil {
		return err
	}

	home := filepath.Join(tmp, "aep")
	// The PostToolUse variants' results come with no request before them:
	// a window of a microsecond keeps them from waiting the reorder
	// window's 250 ms for it.
	srv, err := adapter.NewServer(adapter.Config{Config: emitter.Config{Home: home, Posture: mapping.DefaultPosture(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, Listen: "127.0.0.1:0", ReorderWindow: time.Microsecond})
	if err != nil {
		return err
	}
	addr, err := srv.Listen()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Run(ctx) //nolint:errcheck // a benchmark adapter
	<-srv.Ready()
	token, err := os.ReadFile(adapter.TokenPath(home))
	if err != nil {
		return err
	}
	port := addr.String()[strings.LastIndex(addr.String(), ":")+1:]

	hookCmd := func(bin string) string { return fmt.Sprintf("%s --daemon http://%s --home %s", bin, addr, home) }
	type variant struct {
		name, cmd, payload string
		base               int // the variant it is measured against; -1: none
	}
	variants := []variant{
		{"/bin/true (spawn floor)", "/bin/true", payload, -1},
		{"trivial Go binary", trivial, payload, -1},
		{"kimi-hook → adapter", hookCmd(hookBin), payload, -1},
	}
	if nodeBin != "none" {
		variants = append(variants, variant{"Node shim → adapter", fmt.Sprintf("%s %s %s %s", nodeBin, shim, port, strings.TrimSpace(string(token))), payload, -1})
	}
	if baseBin != "" {
		variants = append(variants, variant{"base kimi-hook → adapter", hookCmd(baseBin), payload, -1})
		variants[2].base = len(variants) - 1
		for _, h := range []struct{ name, payload string }{{"PreToolUse", prePayload}, {"PostToolUse", postPayload}} {
			variants = append(variants,
				variant{"kimi-hook " + h.name, hookCmd(hookBin), h.payload, len(variants) + 1},
				variant{"base kimi-hook " + h.name, hookCmd(baseBin), h.payload, -1})
		}
	}
	results := make([][]time.Duration, len(variants))
	cpu := make([][]time.Duration, len(variants))
	faults := make([]int64, len(variants))
	// Interleave the variants so drift on a shared machine hits all alike,
	// in a new order each round: in a fixed order a variant always follows
	// the same one (a kimi-hook right after the trivial binary, the base
	// right after a kimi-hook that just woke the adapter), which put the
	// same binary 0.7 ms apart from itself (-hook X -base X).
	order := rand.New(rand.NewPCG(uint64(n), roundSeed))
	for i := 0; i < n; i++ {
		for _, v := range order.Perm(len(variants)) {
			variant := variants[v]
			d, c, f, err := spawn(variant.cmd, variant.payload)
			if err != nil {
				return fmt.Errorf("%s: %w", variant.name, err)
			}
			results[v] = append(results[v], d)
			cpu[v] = append(cpu[v], c)
			faults[v] += f
		}
	}
	floor := median(results[1])
	fmt.Printf("hook round trip, %d spawns each through /bin/sh -c, interleaved in a shuffled order\n\n", n)
	fmt.Println("| variant | median | p99 | median − trivial Go | against base | paired | CPU median | CPU against base | page faults |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	for v, variant := range variants {
		m, c := median(results[v]), median(cpu[v])
		against, paired, cpuAgainst := "", "", ""
		if variant.base >= 0 {
			cb := median(cpu[variant.base])
			cpuAgainst = fmt.Sprintf("%+.2f ms (%.3fx)", float64(c-cb)/1e6, float64(c)/float64(cb))
			b := median(results[variant.base])
			against = fmt.Sprintf("%+.2f ms (%.3fx)", float64(m-b)/1e6, float64(m)/float64(b))
			// The median of each round's difference: the two ran moments
			// apart, so slow drift in the machine's load cancels.
			diffs := make([]time.Duration, n)
			for i := range diffs {
				diffs[i] = results[v][i] - results[variant.base][i]
			}
			paired = fmt.Sprintf("%+.2f ms", float64(median(diffs))/1e6)
		}
		fmt.Printf("| %s | %s | %s | %+.2f ms | %s | %s | %s | %s | %.1f |\n", variant.name, ms(m), ms(pct(results[v], 0.99)), float64(m-floor)/1e6, against, paired, ms(c), cpuAgainst, float64(faults[v])/float64(n))
	}
	return nil
}

// buildHook returns bin, or when it is empty a kimi-hook built from this
// checkout into dir.
func buildHook(dir, bin string) (string, error) {
	if bin != "" {
		return bin, nil
	}
	root, err := fixtures.ModuleRoot()
	if err != nil {
		return "", err
	}
	bin = filepath.Join(dir, "kimi-hook")
	return bin, proctest.GoBuild(context.Background(), root, bin, "./cmd/kimi-hook")
}

// stage copies the binary at src into dir as name and returns the copy's
// path. Both kimi-hooks run from copies written the same way, moments
// apart: in two runs of three, the same bytes straight from the linker
// cost 0.6-1.1 ms more CPU per exec than a copy of them, so a fresh build
// against an old one measured partly where each file came from.
func stage(dir, name, src string) (string, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, name)
	return dst, os.WriteFile(dst, b, 0o700)
}

// spawn runs command through /bin/sh -c with payload on stdin and returns
// its wall time and the CPU time (user and system) the shell and the hook
// used: the CPU time is the hook's own cost, which the machine's load
// hardly moves, while the wall time adds every wait for a core.
func spawn(command, payload string) (time.Duration, time.Duration, int64, error) {
	cmd := exec.Command("/bin/sh", "-c", command)
	cmd.Stdin = strings.NewReader(payload)
	start := time.Now()
	out, err := cmd.Output()
	d := time.Since(start)
	if err != nil {
		return 0, 0, 0, err
	}
	if len(out) > 0 {
		return 0, 0, 0, fmt.Errorf("printed %q on an observing hook", out)
	}
	return d, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), minorFaults(cmd.ProcessState), nil
}

func median(ds []time.Duration) time.Duration { return pct(ds, 0.5) }

func pct(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }
