package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/cli"
)

// healthzCommand checks the local daemons' /healthz (the container
// HEALTHCHECK, and scripts): exit 0 when every URL answers 200, 1
// otherwise.
func healthzCommand(getenv func(string) string, std stdio) cli.Command {
	return cli.Command{
		Name:    "healthz",
		Summary: "check the local daemons' /healthz (exit 1 when one is down)",
		Forms:   []string{"[--timeout D] [URL...]"},
		About:   "Checks each URL (default: the relay and the adapter on their usual local ports) and prints its answer.",
		Exit:    "Exit 0 when every URL answers 200, 1 otherwise, 2 usage.",
		Args:    cli.AnyArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			timeout := fs.Duration("timeout", 2*time.Second, "per-request timeout")
			return func(ctx context.Context, urls []string) int { return runHealthz(ctx, *timeout, urls, std) }
		},
	}
}

// runHealthz checks each URL.
func runHealthz(ctx context.Context, timeout time.Duration, urls []string, std stdio) int {
	if len(urls) == 0 {
		urls = []string{"http://127.0.0.1:8787/healthz", "http://127.0.0.1:8398/healthz"}
	}
	code := 0
	client := &http.Client{Timeout: timeout}
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			fmt.Fprintf(std.err, "aep-kimi healthz: %v\n", err)
			return 2
		}
		resp, err := client.Do(req)
		if err != nil {
			fmt.Fprintf(std.out, "%s: down (%v)\n", u, err)
			code = 1
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		fmt.Fprintf(std.out, "%s: %d %s\n", u, resp.StatusCode, body)
		if resp.StatusCode != http.StatusOK {
			code = 1
		}
	}
	return code
}
