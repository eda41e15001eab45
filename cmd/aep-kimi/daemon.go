package main

import (
	"context"
	"fmt"

	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
)

// daemon is a long-running component wired to its relay publisher (a source
// of sessions: the adapter, the bridge).
type daemon interface {
	Run(ctx context.Context) error
}

// serveDaemon reads the relay token, builds a daemon with it and runs it
// until ctx is done: exit 2 when it cannot be configured, 1 when it fails.
func serveDaemon(ctx context.Context, name string, io stdio, getenv func(string) string, tokenFile string, build func(token string) (daemon, error)) int {
	token, err := tokenfile.Client(getenv, tokenFile)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", name, err)
		return 2
	}
	d, err := build(token)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", name, err)
		return 2
	}
	if err := d.Run(ctx); err != nil {
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", name, err)
		return 1
	}
	return 0
}
