package station

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/fleetpage"
)

// Banner is what `aep-kimi up` says once everything is bound.
type Banner struct {
	// RelayAddr, AdapterURL are where the relay and the adapter listen;
	// RelayURL reaches the relay from this machine (the page's base).
	RelayAddr, RelayURL, AdapterURL string
	// Token is the relay token; TokenFile where it is kept ("" when it
	// came from AEP_TOKEN).
	Token, TokenFile string
	// HookToken and Logs are the adapter's hook token file and log
	// directory.
	HookToken, Logs string
	Bridge          string // what the bridge does, or why it is off
	Control         Control
	Public          bool
	// Hooks is the config.toml where Kimi's hooks are registered as this
	// adapter needs them; "" when they are not (yet).
	Hooks string
	// Notify names the --notify targets (secrets elided).
	Notify []string
	// Store says where the relay keeps its history.
	Store string
}

// Control is the banner's view of the control legs.
type Control struct {
	// Gate is on when tool calls are held for an answer: up to Hold, then
	// OnTimeout (allow or deny) applies. KimiTimeout is set when Kimi's
	// registered PreToolUse timeout shortened the hold.
	Gate        bool
	Hold        time.Duration
	OnTimeout   string
	KimiTimeout time.Duration
	Instruct    bool
	// Setup is the command that registers the hooks these legs need.
	Setup string
}

// Write writes the banner to w. The page's login URL carries the relay
// token, so it is written only when login is true (stdout is a terminal);
// otherwise the page line points at `aep-kimi open`, and a log, a journal
// or a redirect never holds the token.
func (b Banner) Write(w io.Writer, login bool) {
	tok := "AEP_TOKEN (from the environment)"
	switch {
	case b.Token == "":
		tok = "none (" + b.TokenFile + " is empty): watch-only, control refused"
	case b.TokenFile != "":
		tok = b.TokenFile + " (0600)"
	}
	page := fleetpage.LoginURL(b.RelayURL, "") + "   the fleet page: aep-kimi open opens it logged in"
	if login && b.Token != "" {
		page = fleetpage.LoginURL(b.RelayURL, b.Token) + "   the fleet page (the part after # logs the browser in; aep-kimi open opens it)"
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "aep-kimi up: running (Ctrl-C to stop)\n")
	scheme, _, _ := strings.Cut(b.RelayURL, "://")
	if scheme == "" || strings.Contains(scheme, "/") {
		scheme = "http"
	}
	fmt.Fprintf(&sb, "  relay    %s://%s   AEP 0.1: POST /events, GET /stream, WS /socket; token %s\n", scheme, b.RelayAddr, tok)
	fmt.Fprintf(&sb, "  page     %s\n", page)
	if b.Store != "" {
		fmt.Fprintf(&sb, "  store    %s\n", b.Store)
	}
	fmt.Fprintf(&sb, "  adapter  %s   kimi-hook posts here; hook token %s; logs %s\n", b.AdapterURL, b.HookToken, b.Logs)
	fmt.Fprintf(&sb, "  bridge   %s\n", b.Bridge)
	fmt.Fprintf(&sb, "  control  %s\n", b.Control.line())
	if len(b.Notify) > 0 {
		fmt.Fprintf(&sb, "  notify   %s\n", strings.Join(b.Notify, ", "))
	}
	if b.Hooks != "" {
		fmt.Fprintf(&sb, "  hooks    registered in %s (aep-setup check checks them; changes apply to the next call)\n", b.Hooks)
	}
	fmt.Fprintf(&sb, "  settings flags and AEP_* are read at start (restart up to change them); rules and tokens as they change\n")
	if b.Public {
		fmt.Fprintf(&sb, "  WARNING  listening on all interfaces: anyone who reaches the port may try the token\n")
	}
	fmt.Fprintf(&sb, "\nNext:\n")
	setupCmd := b.Control.Setup
	if setupCmd == "" {
		setupCmd = "aep-setup write kimi-code"
	}
	step := 1
	if b.Hooks == "" {
		fmt.Fprintf(&sb, "  %d. register the hooks with Kimi:  %s\n", step, setupCmd)
		step++
	}
	fmt.Fprintf(&sb, "  %d. watch the stream:              aep-kimi tail\n", step)
	io.WriteString(w, sb.String()) //nolint:errcheck // stdout gone: nothing to tell
}

func (c Control) line() string {
	gate := "off (--control or AEP_KIMI_CONTROL=1 to hold tool calls for an answer)"
	if c.Gate {
		then := "then Kimi runs it (--on-timeout allow)"
		if c.OnTimeout == "deny" {
			then = "then it is denied (--on-timeout deny)"
		}
		gate = fmt.Sprintf("ON: each tool call held up to %s for an answer (aep-kimi respond), %s", c.Hold.Round(100*time.Millisecond), then)
		if c.KimiTimeout > 0 {
			gate += fmt.Sprintf("; Kimi's PreToolUse timeout (%s) cuts the hold short: %s", c.KimiTimeout, c.Setup)
		}
	}
	instruct := "off (AEP_INSTRUCT=1)"
	if c.Instruct {
		instruct = "ON (aep-kimi instruct)"
	}
	return "gate " + gate + "; instruct " + instruct
}
