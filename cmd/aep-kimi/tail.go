package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Tail defaults.
const (
	// tailSaveEvery bounds how stale the state file can be while running.
	tailSaveEvery = time.Second
)

// runTail is `aep-kimi tail`: a terminal timeline of a relay's stream over
// SSE, deduplicated on (source, id), resuming from a state file.
func runTail(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("aep-kimi tail", flag.ContinueOnError)
	fs.SetOutput(io.err)
	relayURL := fs.String("relay", envOr(os.Getenv, "AEP_RELAY", DefaultRelayURL), "relay base URL (env AEP_RELAY)")
	filter := fs.String("filter", "", `attr-match filter JSON, e.g. '{"type":"attention.*"}'`)
	capture := fs.String("capture", "", "capture ceiling: none, metadata, redacted or full")
	from := fs.String("from", "", `replay first: "all", or a JSON array of {session, epoch, seq}`)
	statePath := fs.String("state", filepath.Join(aepHome(os.Getenv), "tail-state.json"), `resume state file ("none" disables)`)
	token := fs.String("token", "", "bearer token (default: AEP_TOKEN, AEP_TOKEN_FILE, else $AEP_HOME/token)")
	once := fs.Bool("once", false, "print the replay and exit instead of following")
	noColor := fs.Bool("no-color", false, "never colour the output")
	fs.Usage = func() {
		fmt.Fprintln(io.err, "usage: aep-kimi tail [--relay URL] [--filter JSON] [--capture LEVEL] [--from all] [--state FILE] [--token T] [--once] [--no-color]")
		fmt.Fprintln(io.err, "\nFollows a relay's event stream as a timeline, resuming where the last run stopped.")
		fmt.Fprintln(io.err, "Each row: time, agent, session (short id and title), position, type, and what happened")
		fmt.Fprintln(io.err, "(the tool and its arguments as far as the capture level carried them, outcomes,")
		fmt.Fprintln(io.err, "durations). Under an attention request: its id, options and expiry, and either the")
		fmt.Fprintln(io.err, "command that answers it, ready to paste (aep-kimi respond --option deny SESSION ID),")
		fmt.Fprintln(io.err, "or where to answer it (in Kimi itself). Colour only on a terminal, never with")
		fmt.Fprintln(io.err, "--no-color or NO_COLOR. See also: aep-kimi pending.")
		fmt.Fprintln(io.err, "\nFlags:")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, io, 0); !ok {
		return code
	}
	if *token = httpguard.TrimToken(*token); *token == "" {
		t, err := relayToken(os.Getenv, os.Getenv("AEP_TOKEN_FILE"))
		if err != nil {
			fmt.Fprintf(io.err, "aep-kimi tail: %v\n", err)
			return 2
		}
		*token = t
	}
	if _, err := aep.ParseFilter([]byte(*filter)); err != nil {
		fmt.Fprintf(io.err, "aep-kimi tail: --filter: %v\n", err)
		return 2
	}
	if *capture != "" {
		if _, err := aep.ParseCapture(*capture); err != nil {
			fmt.Fprintf(io.err, "aep-kimi tail: --capture: %v\n", err)
			return 2
		}
	}
	fromReq, err := wire.ParseFrom([]byte(*from))
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi tail: --from: %v\n", err)
		return 2
	}

	state := client.NewTailState()
	persist := *statePath != "" && *statePath != "none"
	if persist {
		if state, err = client.LoadTailState(*statePath); err != nil {
			fmt.Fprintf(io.err, "aep-kimi tail: %v (starting fresh)\n", err)
		}
	}
	pr := &tailPrinter{w: io.out, color: useColor(*noColor, os.Getenv, io.out)}
	if pr.color {
		// The colour codes are ours, and the printer passed every field
		// through the sanitizer before colouring it.
		pr.w = unwrapped(io.out)
	}
	if *relayURL != envOr(os.Getenv, "AEP_RELAY", DefaultRelayURL) {
		pr.relayArg = displayURL(*relayURL)
	}
	var lastSave time.Time
	save := func(force bool) {
		if !persist || (!force && time.Since(lastSave) < tailSaveEvery) {
			return
		}
		lastSave = time.Now()
		if err := state.Save(*statePath); err != nil {
			fmt.Fprintf(io.err, "aep-kimi tail: %v\n", err)
		}
	}
	shown := displayURL(*relayURL)
	unreachable := false
	t, err := client.NewTailer(client.TailConfig{
		URL:     *relayURL,
		Token:   *token,
		Filter:  *filter,
		Capture: *capture,
		From:    fromReq,
		State:   state,
		Live:    !*once,
		OnEvent: func(ev *aep.Event) {
			pr.print(ev)
			save(false)
		},
		OnStatus: func(st client.TailStatus) {
			switch st.Kind {
			case client.TailUnreachable:
				if !unreachable {
					unreachable = true
					fmt.Fprintf(io.err, "aep-kimi tail: relay %s unreachable (%v); retrying with backoff\n", shown, st.Err)
				}
			case client.TailConnected:
				if unreachable {
					unreachable = false
					fmt.Fprintf(io.err, "aep-kimi tail: connected to %s\n", shown)
				}
			case client.TailExhausted:
				pr.notice("replay exhausted: " + describeExhausted(st.Detail))
			case client.TailEnded:
				save(true)
				if !*once {
					why := "stream ended"
					if st.Detail != "" {
						why = "relay ended the stream (" + st.Detail + ")"
					}
					fmt.Fprintf(io.err, "aep-kimi tail: %s; resuming\n", why)
				}
			}
		},
	})
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi tail: %v\n", err)
		return 2
	}
	err = t.Run(ctx)
	save(true)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi tail: %v\n", err)
		return 1
	}
	return 0
}

// displayURL drops credentials and the query (which may carry an
// access_token) from a URL before it is printed.
func displayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable relay URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// useColor reports whether to colour output to w: only on a terminal, and
// never with --no-color or NO_COLOR set (any value, per no-color.org).
func useColor(noColor bool, getenv func(string) string, w io.Writer) bool {
	return !noColor && getenv("NO_COLOR") == "" && isTerminal(w)
}

func isTerminal(w io.Writer) bool {
	f, ok := unwrapped(w).(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// unwrapped is w without the sanitizing layer run adds to every command's
// output.
func unwrapped(w io.Writer) io.Writer {
	if sw, ok := w.(*consumer.Writer); ok {
		return sw.Unwrap()
	}
	return w
}

func describeExhausted(detail string) string {
	session, earliest, ok := strings.Cut(detail, " ")
	if !ok {
		return detail
	}
	return fmt.Sprintf("session %s holds nothing older than %s; earlier events are gone from the relay", session, earliest)
}
