package httpguard

import (
	"flag"
	"fmt"
	"net/url"
)

// AllowedHostsFlag registers --allowed-hosts, every daemon's: the host
// names, besides loopback, a request's Host may carry (DNS-rebinding
// defence).
func AllowedHostsFlag(fs *flag.FlagSet, dst *string, getenv func(string) string) {
	fs.StringVar(dst, "allowed-hosts", getenv("AEP_ALLOWED_HOSTS"),
		"names besides loopback this daemon answers to, comma-separated: host, *.domain, or * for any (env AEP_ALLOWED_HOSTS)")
}

// ParseAllowedHostsFlag is ParseAllowedHosts with the error naming the flag.
func ParseAllowedHostsFlag(s string) ([]string, error) {
	hosts, err := ParseAllowedHosts(s)
	if err != nil {
		return nil, fmt.Errorf("--allowed-hosts: %w", err)
	}
	return hosts, nil
}

// DisplayURL is raw fit to print: without credentials, query or fragment.
func DisplayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable relay URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
