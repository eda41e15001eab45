package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"
	"github.com/aep-kimi/aep-kimi/station"
)

// healthzCommand checks the local daemons' /healthz (the container
// HEALTHCHECK, and scripts): exit 0 when every URL answers 200, 1
// otherwise.
func healthzCommand(getenv func(string) string, std stdio) cli.Command {
	return cli.Command{
		Name:    "healthz",
		Summary: "check the local daemons' /healthz (exit 1 when one is down)",
		Forms:   []string{"[--timeout D] [--ca FILE] [URL...]"},
		About:   "Checks each URL (default: the relay and the adapter on their usual local ports) and prints its answer.",
		Exit:    "Exit 0 when every URL answers 200, 1 otherwise, 2 usage.",
		Args:    cli.AnyArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			timeout := fs.Duration("timeout", 2*time.Second, "per-request timeout")
			var caFile string
			tlsconf.CAFlag(fs, &caFile, getenv)
			return func(ctx context.Context, urls []string) int { return runHealthz(ctx, *timeout, caFile, urls, std) }
		},
	}
}

// runHealthz checks each URL.
func runHealthz(ctx context.Context, timeout time.Duration, caFile string, urls []string, std stdio) int {
	if len(urls) == 0 {
		urls = station.DefaultHealthURLs()
	}
	hc, err := tlsconf.HTTPClient(caFile)
	if err != nil {
		fmt.Fprintf(std.err, "aep-kimi healthz: %v\n", err)
		return 2
	}
	ok, err := station.CheckHealth(ctx, timeout, hc, urls, std.out)
	switch {
	case err != nil:
		fmt.Fprintf(std.err, "aep-kimi healthz: %v\n", err)
		return 2
	case !ok:
		return 1
	}
	return 0
}
