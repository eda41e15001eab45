package client

import (
	"strings"

	"github.com/aep-kimi/aep-kimi/internal/cli"
)

// DefaultURL is where the daemons publish and the tools read unless told
// otherwise.
const DefaultURL = "http://127.0.0.1:8787"

// URLFromEnv is $AEP_RELAY, else DefaultURL.
func URLFromEnv(getenv func(string) string) string { return cli.EnvOr(getenv, "AEP_RELAY", DefaultURL) }

// IsNone reports a relay URL that turns publishing off ("none", or empty).
func IsNone(url string) bool { u := strings.TrimSpace(url); return u == "" || u == "none" }
