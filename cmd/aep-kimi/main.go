// Command aep-kimi runs the aep-kimi daemons (up, relay, adapter,
// bridge-web, dash) and tools (tail, pending, respond, instruct, cancel,
// open, healthz, quarantine, map, validate, export).
//
// Every command is one entry of the table below, built in its own file:
// name, summary, usage, flags and what runs. This file only dispatches.
// Exit codes: 0 ok, 1 failure, 2 usage.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// commands is the table of aep-kimi's commands, in the order the top-level
// help lists them.
func commands() []command {
	return []command{
		upCommand(),
		relayCommand(),
		adapterCommand(),
		bridgeWebCommand(),
		dashCommand(),
		tailCommand(),
		pendingCommand(),
		respondCommand(),
		instructCommand(),
		cancelCommand(),
		openCommand(),
		healthzCommand(),
		quarantineCommand(),
		mapCommand(),
		validateCommand(),
		exportCommand(),
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

// runContext dispatches args[0] to its command: no command prints the help
// and exits 2, -h prints it and exits 0.
func runContext(ctx context.Context, args []string, std stdio, getenv func(string) string) int {
	// Whatever a command prints may quote event data or input: no control
	// character in it reaches the terminal raw.
	std.out, std.err = consumer.NewWriter(std.out), consumer.NewWriter(std.err)
	cmds := commands()
	if len(args) == 0 || isHelp(args[0]) {
		topUsage(std.out, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range cmds {
		if c.name == args[0] {
			return c.dispatch(ctx, c.name, args[1:], std, getenv)
		}
	}
	fmt.Fprintf(std.err, "%s: unknown command %q (run %s --help)\n", prog, args[0], prog)
	return 2
}
