package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay"
)

// Tail defaults.
const (
	// tailSaveEvery bounds how stale the state file can be while running.
	tailSaveEvery = time.Second
	// tailSummaryRunes bounds the one-line summary.
	tailSummaryRunes = 100
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
		fmt.Fprintln(io.err, "usage: aep-kimi tail [--relay URL] [--filter JSON] [--capture LEVEL] [--from all] [--state FILE] [--token T]")
		fmt.Fprintln(io.err, "\nFollows a relay's event stream as a timeline, resuming where the last run stopped.")
		fmt.Fprintln(io.err, "\nFlags:")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, io, 0); !ok {
		return code
	}
	if *token == "" {
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
	fromReq, err := relay.ParseFrom([]byte(*from))
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi tail: --from: %v\n", err)
		return 2
	}

	state := relay.NewTailState()
	persist := *statePath != "" && *statePath != "none"
	if persist {
		if state, err = relay.LoadTailState(*statePath); err != nil {
			fmt.Fprintf(io.err, "aep-kimi tail: %v (starting fresh)\n", err)
		}
	}
	pr := &tailPrinter{w: io.out, color: !*noColor && os.Getenv("NO_COLOR") == "" && isTerminal(io.out)}
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
	t, err := relay.NewTailer(relay.TailConfig{
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
		OnStatus: func(st relay.TailStatus) {
			switch st.Kind {
			case relay.TailUnreachable:
				if !unreachable {
					unreachable = true
					fmt.Fprintf(io.err, "aep-kimi tail: relay %s unreachable (%v); retrying with backoff\n", shown, st.Err)
				}
			case relay.TailConnected:
				if unreachable {
					unreachable = false
					fmt.Fprintf(io.err, "aep-kimi tail: connected to %s\n", shown)
				}
			case relay.TailExhausted:
				pr.notice("replay exhausted: " + describeExhausted(st.Detail))
			case relay.TailEnded:
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

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func describeExhausted(detail string) string {
	session, earliest, ok := strings.Cut(detail, " ")
	if !ok {
		return detail
	}
	return fmt.Sprintf("session %s holds nothing older than %s; earlier events are gone from the relay", session, earliest)
}

// ANSI colours, used only on a terminal.
const (
	ansiReset   = "\x1b[0m"
	ansiDim     = "\x1b[2m"
	ansiBold    = "\x1b[1m"
	ansiRed     = "\x1b[31m"
	ansiGreen   = "\x1b[32m"
	ansiYellow  = "\x1b[33m"
	ansiBlue    = "\x1b[34m"
	ansiMagenta = "\x1b[35m"
	ansiCyan    = "\x1b[36m"
)

type tailPrinter struct {
	w     io.Writer
	color bool
}

func (p *tailPrinter) paint(code, s string) string {
	if !p.color || code == "" {
		return s
	}
	return code + s + ansiReset
}

func (p *tailPrinter) notice(msg string) {
	fmt.Fprintln(p.w, p.paint(ansiYellow, "-- "+msg))
}

// print writes one timeline line: time, agent, session, position, type,
// summary.
func (p *tailPrinter) print(ev *aep.Event) {
	fmt.Fprintln(p.w, p.line(ev))
}

func (p *tailPrinter) line(ev *aep.Event) string {
	ts := ev.Time
	if t, err := time.Parse(time.RFC3339Nano, ev.Time); err == nil {
		ts = t.Local().Format("15:04:05.000")
	}
	session := ev.Session
	if session == "" {
		session = "-"
	}
	pos := "-"
	if ev.Seq != nil {
		pos = fmt.Sprintf("#%d", *ev.Seq)
		if e := ev.EpochOrZero(); e != 0 {
			pos = fmt.Sprintf("e%d#%d", e, *ev.Seq)
		}
	}
	sevColor, typeColor := "", ""
	switch ev.SeverityLevel() {
	case aep.SeverityCritical, aep.SeverityError:
		sevColor = ansiRed
	case aep.SeverityWarning:
		sevColor = ansiYellow
	case aep.SeverityNotice:
		sevColor = ansiCyan
	case aep.SeverityDebug:
		sevColor = ansiDim
	}
	switch cat, _, _ := strings.Cut(ev.Type, "."); cat {
	case "attention":
		typeColor = ansiBold + ansiMagenta
	case "control":
		typeColor = ansiBlue
	case "session", "run":
		typeColor = ansiGreen
	case "error":
		typeColor = ansiRed
	}
	if sevColor != "" && sevColor != ansiDim {
		typeColor = sevColor
	}
	line := fmt.Sprintf("%s  %-12s %-14s %-6s %s  %s",
		p.paint(ansiDim, ts), clip(ev.Agent, 12), clip(session, 14), pos,
		p.paint(typeColor, fmt.Sprintf("%-24s", ev.Type)), summarize(ev))
	if sevColor == ansiDim {
		return p.paint(ansiDim, line)
	}
	return strings.TrimRight(line, " ")
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// summaryKeys are the data members worth a glance, in order of preference.
var summaryKeys = []string{"prompt", "message", "text", "reason", "outcome", "status", "kind", "phase", "trigger", "summary", "name"}

// summarize renders a one-line hint of the event: subject, a tool name, and
// the most telling data members, else the compact data.
func summarize(ev *aep.Event) string {
	var parts []string
	if ev.Subject != "" {
		parts = append(parts, ev.Subject)
	}
	data, _ := ev.DataMap()
	if tool, ok := data["tool"].(map[string]any); ok {
		if name, ok := tool["name"].(string); ok && name != ev.Subject {
			parts = append(parts, name)
		}
	}
	if ans, ok := data["answer"].(map[string]any); ok {
		for _, k := range []string{"option", "text"} {
			if v, ok := ans[k].(string); ok {
				parts = append(parts, k+"="+v)
			}
		}
	}
	for _, k := range summaryKeys {
		switch v := data[k].(type) {
		case string:
			parts = append(parts, k+"="+v)
		case json.Number, bool:
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	if len(parts) <= boolInt(ev.Subject != "") && len(data) > 0 {
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts = append(parts, "{"+strings.Join(keys, ",")+"}")
	}
	s := strings.Join(parts, " ")
	s = strings.Join(strings.Fields(s), " ") // one line, no runs of blanks
	return clip(s, tailSummaryRunes)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
