package consumer

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// Rendering limits.
const (
	// SummaryRunes bounds a row's summary and a pending request's prompt.
	SummaryRunes = 100
	// sessionRunes bounds the session column (short id and title).
	sessionRunes = 24
	// shortSessionRunes is how much of a session id the session column shows;
	// the full id appears wherever it is meant to be pasted.
	shortSessionRunes = 8
)

// ANSI colours, used only on a terminal, and only ever around text that went
// through Line. Colours lists them all: nothing else a Printer writes is a
// control sequence.
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

// Colours are every control sequence a colouring Printer writes.
var Colours = []string{ansiReset, ansiDim, ansiBold, ansiRed, ansiGreen, ansiYellow, ansiBlue, ansiMagenta, ansiCyan}

// Printer renders events as timeline rows, one per event, with the lines
// that say how to answer an attention request under it. Every field from
// event data goes through Line before colour is added. Set W; the zero
// values of the rest print without colour, on the local clock and zone.
// It remembers session titles and epochs as they stream by.
type Printer struct {
	W     io.Writer
	Color bool
	// Now is the clock for expiry countdowns (nil: time.Now); Loc the zone
	// of the time column (nil: local).
	Now func() time.Time
	Loc *time.Location
	// RelayArg is repeated as --relay in pasted commands when the stream
	// comes from a relay other than the one respond would default to.
	RelayArg string
	titles   map[string]string
	epochs   map[string]int64
}

func (p *Printer) clock() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Printer) paint(code, s string) string {
	if !p.Color || code == "" {
		return s
	}
	return code + s + ansiReset
}

// Notice prints a line about the stream itself (a new epoch, a replay that
// lost events).
func (p *Printer) Notice(msg string) {
	fmt.Fprintln(p.W, p.paint(ansiYellow, "-- "+Line(msg)))
}

// Print writes an event's row, and for an attention request the lines that
// say how to answer it. The row shows seq alone; a session's new epoch (its
// emitter restarted, seq starts over) gets a notice instead of a number in
// every row.
func (p *Printer) Print(ev *aep.Event) {
	if ev.Session != "" && ev.Seq != nil {
		e := ev.EpochOrZero()
		if last, seen := p.epochs[ev.Session]; seen && last != e {
			p.Notice(fmt.Sprintf("session %s: new epoch %d (its emitter restarted; seq starts over)", shortID(ev.Session), e))
		}
		if p.epochs == nil {
			p.epochs = map[string]int64{}
		}
		p.epochs[ev.Session] = e
	}
	fmt.Fprintln(p.W, p.line(ev))
	for _, l := range p.detail(ev) {
		fmt.Fprintln(p.W, l)
	}
}

// line is one timeline row: time, agent, session (short id and title), seq,
// type, and what happened in words.
func (p *Printer) line(ev *aep.Event) string {
	data, _ := ev.DataMap()
	if ev.Type == "session.started" && ev.Session != "" {
		if title := str(data, "label"); title != "" {
			if p.titles == nil {
				p.titles = map[string]string{}
			}
			p.titles[ev.Session] = Line(oneLine(title))
		}
	}
	ts := Line(ev.Time)
	if t, err := time.Parse(time.RFC3339Nano, ev.Time); err == nil {
		loc := p.Loc
		if loc == nil {
			loc = time.Local
		}
		ts = t.In(loc).Format("15:04:05.000")
	}
	session := "-"
	if sid := rowSession(ev); sid != "" {
		session = Line(shortID(sid))
		if title := p.titles[sid]; title != "" {
			session += " " + title
		}
	}
	pos := "-"
	if ev.Seq != nil {
		pos = fmt.Sprintf("#%d", *ev.Seq)
	}
	typeColor, dim := rowColor(ev)
	line := fmt.Sprintf("%s  %-12s %-*s %-6s %s  %s",
		p.paint(ansiDim, ts), clip(Line(ev.Agent), 12), sessionRunes, clip(session, sessionRunes), pos,
		p.paint(typeColor, fmt.Sprintf("%-24s", Line(ev.Type))), clip(Line(oneLine(describe(ev, data))), SummaryRunes))
	line = strings.TrimRight(line, " ")
	if dim {
		return p.paint(ansiDim, line)
	}
	return line
}

// rowColor picks the type column's colour: results green, failures red,
// refusals and expiries yellow, requests for a person bold magenta; debug
// rows are dimmed whole.
func rowColor(ev *aep.Event) (code string, dim bool) {
	switch ev.Type {
	case "run.finished", "tool.completed", "control.accepted", "session.started":
		return ansiGreen, false
	case "run.failed", "tool.failed", "control.rejected":
		return ansiRed, false
	case "tool.denied", "run.cancelled", "attention.timeout":
		return ansiYellow, false
	case "attention.requested":
		return ansiBold + ansiMagenta, false
	}
	switch ev.SeverityLevel() {
	case aep.SeverityCritical, aep.SeverityError:
		return ansiRed, false
	case aep.SeverityWarning:
		return ansiYellow, false
	case aep.SeverityDebug:
		return "", true
	}
	switch cat, _, _ := strings.Cut(ev.Type, "."); cat {
	case "attention":
		return ansiMagenta, false
	case "control":
		return ansiBlue, false
	case "session", "run":
		return ansiCyan, false
	case "error":
		return ansiRed, false
	}
	return "", false
}

// describe says what an event means in words a person reads: the tool and
// its arguments (as far as the capture level carried them), outcomes,
// durations, answers; unknown types fall back to their scalar values.
func describe(ev *aep.Event, data map[string]any) string {
	var parts []string
	add := func(s string) {
		if s = strings.TrimSpace(s); s != "" {
			parts = append(parts, s)
		}
	}
	took := func(prefix string) {
		if d, ok := millis(data, "duration_ms"); ok {
			add(prefix + HumanDuration(d))
		}
	}
	switch ev.Type {
	case "session.started":
		add(quoted(str(data, "label")))
		add(parenthesized(str(data, "trigger")))
		add(str(data, "gen_ai.request.model"))
		lifecycleText(ev, add)
	case "session.ended":
		add(str(data, "reason"))
		took("after ")
		if n, ok := data["runs"].(json.Number); ok {
			add(plural(n.String(), "run"))
		}
		lifecycleText(ev, add)
	case "agent.presence", "agent.health":
		agentText(ev, data, add)
	case "session.compacted":
		add(parenthesized(str(data, "trigger")))
		if n, ok := data["estimated_token_count"].(json.Number); ok {
			add("~" + plural(n.String(), "token"))
		}
	case "run.started":
		add(firstOf(str(data, "prompt"), parenthesized(str(data, "trigger"))))
	case "run.finished":
		took("in ")
	case "run.failed":
		add(errorText(data, str(data, "reason")))
		took("after ")
	case "run.cancelled":
		if by := str(data, "by"); by != "" {
			add("by " + by)
		}
		took("after ")
	case "tool.requested":
		add(toolName(ev, data) + argsText(data))
	case "tool.completed":
		add(toolName(ev, data))
		took("in ")
		add(resultText(data))
	case "tool.failed":
		add(toolName(ev, data) + ": " + errorText(data, "failed"))
		took("after ")
	case "tool.denied":
		add(toolName(ev, data))
		if by := str(data, "by"); by != "" {
			add("denied by " + by)
		}
		if rule := str(data, "rule"); rule != "" {
			add("rule " + rule)
		}
	case "attention.requested":
		add(str(data, "prompt"))
		add(parenthesized(str(data, "kind")))
	case "attention.answered":
		add(answerText(data))
		if by := str(data, "by"); by != "" {
			add("by " + by)
		}
		if via := str(data, "via"); via != "" {
			add("via " + via)
		}
	case "attention.resolved":
		add(str(data, "resolution"))
		add(parenthesized(str(data, "reason")))
		if d, ok := millis(data, "latency_ms"); ok {
			add("after " + HumanDuration(d))
		}
	case "attention.timeout":
		s := "expired unanswered"
		if d, ok := millis(data, "after_ms"); ok {
			s += " after " + HumanDuration(d)
		}
		add(s)
		add(expiryOutcome(data))
	case "control.accepted":
		add("command " + firstOf(ev.Cause, "?"))
	case "control.rejected":
		add(firstOf(str(data, "reason"), "rejected"))
		add(str(data, "detail"))
		if ev.Cause != "" {
			add("command " + ev.Cause)
		}
	case "control.attention.respond":
		add(answerText(data))
		if ev.Subject != "" {
			add("to request " + ev.Subject)
		}
	default:
		if ev.Subject != "" {
			add(ev.Subject)
		}
		if strings.HasPrefix(ev.Type, "error.") {
			add(errorText(data, ""))
		}
		add(scalars(data))
	}
	return strings.Join(parts, " · ")
}

// detail is the lines under an attention request: its id, options and
// expiry, and the command that answers it, or where to answer it when the
// request is informational here (AEP-0008 respond_via).
func (p *Printer) detail(ev *aep.Event) []string {
	if ev.Type != "attention.requested" {
		return nil
	}
	data, _ := ev.DataMap()
	req := newRequest(ev, data)
	const indent = "              ↳ "
	facts := []string{"request " + ev.ID}
	if len(req.Options) > 0 {
		facts = append(facts, "options "+strings.Join(req.OptionIDs(), ", "))
	}
	expired := false
	if !req.Deadline.IsZero() {
		left := req.Deadline.Sub(p.clock())
		if expired = left <= 0; expired {
			facts = append(facts, "expired "+HumanDuration(-left)+" ago")
		} else if req.Fate() != "" {
			facts = append(facts, req.Countdown(p.clock()))
		} else {
			facts = append(facts, "expires in "+HumanDuration(left))
		}
	}
	out := []string{indent + Line(strings.Join(facts, " · "))}
	switch {
	case expired:
	case req.Answerable():
		out = append(out, indent+p.paint(ansiBold, Line(req.Command(p.RelayArg))))
	default:
		out = append(out, indent+Line("answer it "+req.Where()+"; it cannot be answered from here"))
	}
	return out
}

// Command is the respond command that answers r, ready to paste: the
// refusing option when offered (the safe default to show), else the first.
func (r *Request) Command(relayArg string) string {
	args := []string{"aep-kimi", "respond"}
	if relayArg != "" {
		args = append(args, "--relay", ShellQuote(relayArg))
	}
	if opt := r.Suggested(); opt != "" {
		args = append(args, "--option", ShellQuote(opt))
	} else {
		args = append(args, "--text", "'your answer'")
	}
	return strings.Join(append(args, ShellQuote(r.Session), ShellQuote(r.ID)), " ")
}

// Suggested is the option a pasted command offers: the refusing one when
// there is one, else the first ("" without options).
func (r *Request) Suggested() string {
	for _, want := range []string{"deny", "reject", "rejected"} {
		for _, o := range r.Options {
			if o.ID == want {
				return o.ID
			}
		}
	}
	if len(r.Options) > 0 {
		return r.Options[0].ID
	}
	return ""
}

// Where says where an informational request is answered.
func (r *Request) Where() string {
	for _, v := range r.RespondVia {
		if v == "oob" {
			return "in Kimi itself (respond_via oob)"
		}
	}
	return "where the agent asks (respond_via " + strings.Join(r.RespondVia, ", ") + ")"
}

// ShellQuote quotes s for a POSIX shell unless it is plainly safe.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:/@%+=,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func toolName(ev *aep.Event, data map[string]any) string {
	if tool, ok := data["tool"].(map[string]any); ok {
		if n := str(tool, "name"); n != "" {
			return n
		}
	}
	return firstOf(ev.Subject, "tool")
}

// argsText is ": SUMMARY" from the arguments the event carries (args at
// full, args_redacted at redacted), or says they were not captured.
func argsText(data map[string]any) string {
	for _, k := range []string{"args", "args_redacted"} {
		if s := mapping.ArgsSummary(data[k]); s != "" {
			return ": " + s
		}
	}
	if _, ok := data["args_digest"]; ok {
		return " (arguments not captured)"
	}
	return ""
}

func resultText(data map[string]any) string {
	for _, k := range []string{"result", "result_redacted"} {
		switch v := data[k].(type) {
		case string:
			return "→ " + v
		case map[string]any:
			if b, err := aep.Canonical(v); err == nil {
				return "→ " + string(b)
			}
		}
	}
	return ""
}

// errorText is "TYPE: MESSAGE" from data.error, else fallback.
func errorText(data map[string]any, fallback string) string {
	e, _ := data["error"].(map[string]any)
	typ, msg := str(e, "type"), firstOf(str(e, "message"), str(data, "message"))
	switch {
	case typ != "" && msg != "":
		return typ + ": " + msg
	case typ != "" || msg != "":
		return typ + msg
	}
	return fallback
}

func answerText(data map[string]any) string {
	ans, _ := data["answer"].(map[string]any)
	var parts []string
	if o := str(ans, "option"); o != "" {
		parts = append(parts, o)
	}
	if t := str(ans, "text"); t != "" {
		parts = append(parts, quoted(t))
	}
	if v, ok := ans["values"].(map[string]any); ok {
		parts = append(parts, plural(strconv.Itoa(len(v)), "value"))
	}
	return strings.Join(parts, " ")
}

// scalars renders data's scalar members as "key value" in key order, keys
// in words and durations in human units; digests are left out.
func scalars(data map[string]any) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		if strings.HasSuffix(k, "_digest") {
			continue
		}
		var v string
		switch x := data[k].(type) {
		case string:
			v = x
		case bool:
			v = strconv.FormatBool(x)
		case json.Number:
			v = x.String()
			if d, ok := millis(data, k); ok && strings.HasSuffix(k, "_ms") {
				k, v = strings.TrimSuffix(k, "_ms"), HumanDuration(d)
			}
		default:
			continue
		}
		parts = append(parts, strings.ReplaceAll(k, "_", " ")+" "+v)
	}
	return strings.Join(parts, " · ")
}

// millis reads a millisecond count.
func millis(data map[string]any, key string) (time.Duration, bool) {
	n, ok := data[key].(json.Number)
	if !ok {
		return 0, false
	}
	ms, err := n.Int64()
	if err != nil || ms < 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// HumanDuration renders d the way a person says it: 350ms, 4.2s, 49s,
// 3m05s, 2h10m.
func HumanDuration(d time.Duration) string {
	if d >= 10*time.Second {
		d = d.Round(time.Second) // 59.6s is 1m00s, not 60s
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	d = d.Round(time.Minute)
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

// expiryOutcome says what an attention.timeout applied: the call ran anyway
// (and whether Kimi stopped waiting first) or was denied; "" when the event
// does not say.
func expiryOutcome(data map[string]any) string {
	switch str(data, mapping.DataOnExpiry) {
	case mapping.OnExpiryDeny:
		return "denied"
	case mapping.OnExpiryAllow:
		if str(data, "reason") == mapping.TimeoutHookEnded {
			return "Kimi stopped waiting: runs anyway"
		}
		return "runs anyway"
	}
	return ""
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func quoted(s string) string {
	if s == "" {
		return ""
	}
	return "“" + s + "”"
}

func parenthesized(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

func plural(n, unit string) string {
	if n == "1" {
		return n + " " + unit
	}
	return n + " " + unit + "s"
}

// oneLine folds runs of white space (newlines included) into one blank.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// shortID is a session id's first runes, the way a person tells sessions
// apart at a glance.
func shortID(s string) string {
	if r := []rune(s); len(r) > shortSessionRunes {
		return string(r[:shortSessionRunes])
	}
	return s
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
