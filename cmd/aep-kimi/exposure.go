package main

import (
	"flag"
	"fmt"

	"github.com/aep-kimi/aep-kimi/internal/httpguard"
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

// serverToken is the relay's own token: AEP_TOKEN, else the file named by
// AEP_TOKEN_FILE (or --token-file). Empty means watch-only.
func serverToken(getenv func(string) string, file string) (string, error) {
	if t := httpguard.TrimToken(getenv("AEP_TOKEN")); t != "" {
		return t, nil
	}
	if file == "" {
		return "", nil
	}
	return readTokenFile(file)
}
