package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/apicall"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
	"github.com/aep-kimi/aep-kimi/relay/wire"
	"github.com/aep-kimi/aep-kimi/rules"
)

// hintTimeout bounds each question hints ask the relay: a slow answer
// leaves the hint as it was, never the printing.
const hintTimeout = 2 * time.Second

// readerHints fit the answer lines tail and pending print to the reader:
// no answer commands when the relay's discovery offers this token no
// control (a watcher, or a relay that routes none), and the rule that
// answers a request, asked of the relay's rules, in place of its countdown
// and command. A relay that cannot say keeps the commands.
func readerHints(ctx context.Context, base, token string, hc *http.Client, relayArg string) consumer.Hints {
	h := consumer.Hints{RelayArg: relayArg}
	var doc struct {
		Capabilities wire.Capabilities `json:"capabilities"`
	}
	call := apicall.Call{Base: base, Token: token, HTTP: hc, Timeout: hintTimeout, Limit: 1 << 20, API: "the discovery document"}
	if err := call.Do(ctx, http.MethodGet, "/events", nil, &doc); err == nil {
		h.Watching = doc.Capabilities.Control == nil
	}
	rc := rules.Client{Base: base, Token: token, HTTP: hc}
	h.Rule = func(session, id string) string {
		ctx, cancel := context.WithTimeout(ctx, hintTimeout)
		defer cancel()
		v, err := rc.Test(ctx, rules.Probe{Session: session, RequestID: id})
		if err != nil || !v.Decides() || v.Rule == nil {
			return ""
		}
		return fmt.Sprintf("rule %s answers it: %s", v.Rule.ID, v.Effect)
	}
	return h
}
