package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"
)

// runHealthz checks the local daemons' /healthz (the container HEALTHCHECK,
// and scripts): exit 0 when every URL answers 200, 1 otherwise.
func runHealthz(ctx context.Context, args []string, std stdio) int {
	fs := flag.NewFlagSet("aep-kimi healthz", flag.ContinueOnError)
	fs.SetOutput(std.err)
	timeout := fs.Duration("timeout", 2*time.Second, "per-request timeout")
	fs.Usage = func() {
		fmt.Fprintln(std.err, "usage: aep-kimi healthz [URL...]  (default: the relay and the adapter on their usual local ports)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	urls := fs.Args()
	if len(urls) == 0 {
		urls = []string{"http://127.0.0.1:8787/healthz", "http://127.0.0.1:8398/healthz"}
	}
	code := 0
	client := &http.Client{Timeout: *timeout}
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
