// Command aep-kimi runs the aep-kimi daemons (adapter, bridge-web, relay, up)
// and tools (map, validate, tail, pending, respond, cancel, instruct).
//
// Each subcommand lives in its own file as func(ctx, args, stdio) int; this
// file only dispatches. Exit codes: 0 ok, 1 failure, 2 usage.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// stdio is the process's standard streams, passed in so subcommands are
// testable without touching globals.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

type command struct {
	summary string
	run     func(ctx context.Context, args []string, io stdio) int
}

func commands() map[string]command {
	return map[string]command{
		"up":         {"run the relay, the hook adapter and the kimi web bridge together", runUp},
		"adapter":    {"run the hook adapter: Kimi hooks -> AEP events, logs and relay", runAdapter},
		"bridge-web": {"follow kimi web (kap-server) sessions -> AEP events, logs and relay", runBridgeWeb},
		"respond":    {"answer an agent's attention request through the relay", runRespond},
		"pending":    {"list the attention requests waiting on you across the fleet", runPending},
		"cancel":     {"cancel a session's run through the relay", runCancel},
		"instruct":   {"queue an instruction for a session's next prompt", runInstruct},
		"healthz":    {"check the local daemons' /healthz (exit 1 when one is down)", runHealthz},
		"map":        {"map one hook payload (or kap frame) on stdin to AEP events", runMap},
		"validate":   {"check JSONL event streams against AEP 0.1", runValidate},
		"export":     {"convert events to CloudEvents, OTLP or OCSF (AEP-0005 bridges)", runExport},
		"relay":      {"run the AEP collector/relay (POST /events, SSE /stream, WS /socket)", runRelay},
		"tail":       {"follow a relay's event stream as a terminal timeline", runTail},
		"open":       {"open the fleet page (the relay's web view) logged in", runOpen},
		"dash":       {"serve the fleet page fed from several relays, on a loopback port", runDash},
		"quarantine": {"list payloads and log tails set aside under the home, with why", runQuarantine},
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: aep-kimi <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	cmds := commands()
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nRun 'aep-kimi <command> -h' for a command's flags.")
}

// parseFlags parses a subcommand's flags: -h exits 0, a bad flag 2, and the
// positional arguments must number exactly want (-1: any number).
func parseFlags(fs *flag.FlagSet, args []string, io stdio, want int) (code int, ok bool) {
	fs.SetOutput(io.err)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if want >= 0 && fs.NArg() != want {
		if fs.NArg() > want {
			fmt.Fprintf(io.err, "%s: unexpected argument %q\n", fs.Name(), fs.Arg(want))
		} else {
			fs.Usage()
		}
		return 2, false
	}
	return 0, true
}

// daemon is a long-running component wired to its relay emitter.
type daemon interface {
	run(ctx context.Context) error
}

// serveDaemon reads the relay token, builds a daemon with it and runs it
// until ctx is done: exit 2 when it cannot be configured, 1 when it fails.
func serveDaemon(ctx context.Context, name string, io stdio, tokenFile string, build func(token string) (daemon, error)) int {
	token, err := relayToken(os.Getenv, tokenFile)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", name, err)
		return 2
	}
	d, err := build(token)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", name, err)
		return 2
	}
	if err := d.run(ctx); err != nil {
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", name, err)
		return 1
	}
	return 0
}

func main() {
	os.Exit(run(os.Args[1:], stdio{os.Stdin, os.Stdout, os.Stderr}))
}

func run(args []string, io stdio) int {
	// Whatever a command prints may quote event data or input: no control
	// character in it reaches the terminal raw.
	io.out, io.err = consumer.NewWriter(io.out), consumer.NewWriter(io.err)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(io.out)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands()[args[0]]
	if !ok {
		fmt.Fprintf(io.err, "aep-kimi: unknown command %q (run aep-kimi --help)\n", args[0])
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cmd.run(ctx, args[1:], io)
}
