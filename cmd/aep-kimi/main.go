// Command aep-kimi runs the aep-kimi daemons (up, relay, adapter,
// bridge-web, dash) and tools (tail, pending, respond, rules, audit, instruct, cancel,
// rate, open, healthz, quarantine, map, validate, export, service, version).
//
// Every command is one entry of the table below, built in its own file:
// name, summary, usage, flags and what runs (internal/cli parses, dispatches
// and writes the usage from it). Exit codes: 0 ok, 1 failure, 2 usage.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
	"github.com/aep-kimi/aep-kimi/station"
)

// prog is the binary's name in usage lines.
const prog = "aep-kimi"

// stdio is the process's standard streams, passed in so commands are
// testable without touching globals.
type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// commands is the table of aep-kimi's commands, in the order the top-level
// help lists them, reading getenv and std.
func commands(getenv func(string) string, std stdio) []cli.Command {
	return []cli.Command{
		upCommand(getenv, std),
		relayCommand(getenv, std),
		adapterCommand(getenv, std),
		bridgeWebCommand(getenv, std),
		dashCommand(getenv, std),
		tailCommand(getenv, std),
		pendingCommand(getenv, std),
		respondCommand(getenv, std),
		rulesCommand(getenv, std),
		tokenCommand(getenv, std),
		notifyCommand(getenv, std),
		auditCommand(getenv, std),
		instructCommand(getenv, std),
		cancelCommand(getenv, std),
		rateCommand(getenv, std),
		openCommand(getenv, std),
		healthzCommand(getenv, std),
		quarantineCommand(getenv, std),
		mapCommand(getenv, std),
		validateCommand(getenv, std),
		exportCommand(getenv, std),
		serviceCommand(getenv, std),
		versionCommand(getenv, std),
	}
}

func main() {
	os.Exit(run(os.Args[1:], stdio{os.Stdin, os.Stdout, os.Stderr}))
}

func run(args []string, std stdio) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, std, os.Getenv)
}

// runContext runs the command args name.
func runContext(ctx context.Context, args []string, std stdio, getenv func(string) string) int {
	// Whatever a command prints may quote event data or input: no control
	// character in it reaches the terminal raw.
	std.out, std.err = consumer.NewWriter(std.out), consumer.NewWriter(std.err)
	p := cli.Program{Name: prog, Commands: commands(getenv, std), Out: std.out, Err: std.err, Version: versionLine}
	return p.Main(ctx, args)
}

// exitFor is the exit code of a daemon's error: 2 for a configuration
// mistake, 1 for a failure.
func exitFor(err error) int {
	if station.IsUsage(err) {
		return cli.ExitUsage
	}
	return 1
}
