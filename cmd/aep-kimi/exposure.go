package main

import (
	"flag"
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/relay"
)

// allowedHostsFlag is --allowed-hosts on every daemon: the host names,
// besides loopback, a request's Host may carry (DNS-rebinding defence).
func allowedHostsFlag(fs *flag.FlagSet, dst *string, getenv func(string) string) {
	fs.StringVar(dst, "allowed-hosts", getenv("AEP_ALLOWED_HOSTS"),
		"names besides loopback this daemon answers to, comma-separated: host, *.domain, or * for any (env AEP_ALLOWED_HOSTS)")
}

func parseAllowedHosts(s string) ([]string, error) {
	hosts, err := httpguard.ParseAllowedHosts(s)
	if err != nil {
		return nil, fmt.Errorf("--allowed-hosts: %w", err)
	}
	return hosts, nil
}

// limitHeap sets the Go runtime's soft memory limit to the relay's byte
// budget plus relay.HeapHeadroom, unless the operator set GOMEMLIMIT: the
// buffer is the bulk of the heap, and without a limit the collector lets
// garbage grow to about as much again before it runs.
func limitHeap(getenv func(string) string, bufferBytes int64, log *slog.Logger) {
	if getenv("GOMEMLIMIT") != "" {
		return
	}
	if bufferBytes <= 0 {
		bufferBytes = relay.DefaultBufferBytes
	}
	limit := bufferBytes + relay.HeapHeadroom
	debug.SetMemoryLimit(limit)
	log.Info("heap soft limit", "bytes", limit, "why", "buffer_bytes plus headroom; set GOMEMLIMIT to override")
}

// serverToken is the relay's own token: AEP_TOKEN, else the file named by
// AEP_TOKEN_FILE (or --token-file). Empty means watch-only.
func serverToken(getenv func(string) string, file string) (string, error) {
	if t := httpguard.TrimToken(getenv("AEP_TOKEN")); t != "" {
		return t, nil
	}
	if file == "" {
		return "", nil
	}
	return tokenfile.Read(file, true)
}
