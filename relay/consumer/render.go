package consumer

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
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
	// Width is the terminal's width in columns: every line is clipped to
	// it (0: no limit).
	Width int
	// Details adds what a person rarely needs to each row: seq, event
	// type, agent, ids and digests.
	Details bool
	// Hints fit the answer lines under a waiting request to the reader:
	// none for a watcher, the rule for a request a rule answers.
	Hints Hints

	phraser  Phraser
	epochs   map[string]int64
	sessions map[string]LabelOf
	labels   map[string]Label // nil when sessions changed since
	widest   int              // the widest of labels
	// open holds the attention requests still waiting, by session and id;
	// held, until Live, says whether their answer lines wait for the
	// replay to end.
	open map[[2]string]*aep.Event
	held bool
	// tokens keeps each session's token figures; tokensShown the words
	// last shown for them.
	tokens      map[string]*Meter
	tokensShown map[string]string
	// hooked holds the sessions seen from their own emitter, whose
	// companions' rows are quiet.
	hooked map[string]bool
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
	p.writeln(p.paint(ansiYellow, "-- "+Line(msg)))
}

// Hold makes the Printer keep the answer lines of attention requests (how
// long they have, the command that answers them) until Live: a replay
// shows requests long answered, and only those still waiting at its end
// are worth answering.
func (p *Printer) Hold() { p.held = true }

// Live ends a Hold: the requests still waiting are listed again with their
// answer lines, and from now on a request's lines follow its row.
func (p *Printer) Live() {
	if !p.held {
		return
	}
	p.held = false
	waiting := make([]*aep.Event, 0, len(p.open))
	for _, ev := range p.open {
		waiting = append(waiting, ev)
	}
	if len(waiting) == 0 {
		return
	}
	sort.Slice(waiting, func(i, j int) bool {
		if waiting[i].Time != waiting[j].Time {
			return waiting[i].Time < waiting[j].Time
		}
		return waiting[i].ID < waiting[j].ID
	})
	p.Notice(plural(strconv.Itoa(len(waiting)), "request") + " still waiting for an answer:")
	for _, ev := range waiting {
		p.writeln(p.line(ev))
		for _, l := range p.detail(ev) {
			p.writeln(l)
		}
	}
}

// Print writes an event's row, and for an attention request still waiting
// the lines that say how to answer it. The row shows seq alone (with
// Details); a session's new epoch (its emitter restarted, seq starts over)
// gets a notice instead of a number in every row.
func (p *Printer) Print(ev *aep.Event) {
	if !p.Details && p.quiet(ev) {
		p.track(ev)
		return
	}
	if ev.Session != "" && ev.Seq != nil {
		e := ev.EpochOrZero()
		if last, seen := p.epochs[ev.Session]; seen && last != e {
			p.Notice(fmt.Sprintf("session %s: new epoch %d (its emitter restarted; seq starts over)", p.label(ev.Session).ID, e))
		}
		if p.epochs == nil {
			p.epochs = map[string]int64{}
		}
		p.epochs[ev.Session] = e
	}
	p.track(ev)
	p.writeln(p.line(ev))
	if p.held || p.open[[2]string{ev.Session, ev.ID}] == nil {
		return
	}
	for _, l := range p.detail(ev) {
		p.writeln(l)
	}
}

// quiet says whether ev's row is left to --details: a heartbeat (one a
// minute says nothing a person acts on), and the kimi web bridge's view of
// a Kimi session whose story its hooks tell (its token figures still count
// toward the session's).
func (p *Printer) quiet(ev *aep.Event) bool {
	if k, ok := companionOf(ev); ok {
		return p.hooked[k]
	}
	return ev.Type == "session.heartbeat" || strings.HasSuffix(ev.Type, ".session.heartbeat")
}

// writeln writes a line clipped to Width.
func (p *Printer) writeln(l string) {
	fmt.Fprintln(p.W, clipDisplay(l, p.Width))
}

// track keeps what rows are labelled with (each session's project and
// title) and which requests still wait.
func (p *Printer) track(ev *aep.Event) {
	data, _ := ev.DataMap()
	if sid := rowSession(ev); sid != "" {
		if p.sessions == nil {
			p.sessions = map[string]LabelOf{}
		}
		of, known := p.sessions[sid]
		of.Session = sid
		if ev.Type == "session.started" && ev.Session == sid {
			of.Title = firstOf(str(data, "label"), of.Title)
			of.Project = firstOf(ProjectOf(data), of.Project)
		}
		if !known || of != p.sessions[sid] {
			p.sessions[sid], p.labels = of, nil
		}
	}
	if _, companion := companionOf(ev); !companion && ev.Session != "" && ev.Seq != nil {
		if p.hooked == nil {
			p.hooked = map[string]bool{}
		}
		p.hooked[ev.Session] = true
	}
	if sid := rowSession(ev); ev.Session != "" {
		if p.tokens == nil {
			p.tokens = map[string]*Meter{}
		}
		s := p.tokens[sid]
		if s == nil {
			s = &Meter{}
			p.tokens[sid] = s
		}
		s.Take(ev.Type, ev.Time, data)
	}
	switch ev.Type {
	case "attention.requested":
		if p.open == nil {
			p.open = map[[2]string]*aep.Event{}
		}
		p.open[[2]string{ev.Session, ev.ID}] = ev
	case "attention.answered", "attention.resolved", "attention.timeout":
		delete(p.open, [2]string{ev.Session, ev.Subject})
	case "session.ended":
		for k := range p.open {
			if k[0] == ev.Session {
				delete(p.open, k)
			}
		}
	}
}

// label is a session's label among the sessions seen so far.
func (p *Printer) label(sid string) Label {
	if p.labels == nil {
		of := make([]LabelOf, 0, len(p.sessions))
		for _, s := range p.sessions {
			of = append(of, s)
		}
		p.labels = Labels(of)
		p.widest = 0
		for _, l := range p.labels {
			p.widest = max(p.widest, displayWidth(Line(l.String())))
		}
	}
	if l, ok := p.labels[sid]; ok {
		return l
	}
	// A session no row has shown yet: its id's start, as labels begin.
	return Labels([]LabelOf{{Session: sid}})[sid]
}

// labelColumn is a session's label fitted to n columns: the id always
// whole (it is what keeps two sessions apart), project and title clipped.
func (p *Printer) labelColumn(sid string, n int) string {
	l := p.label(Line(sid))
	id := Line(l.ID)
	head := Line(Label{Project: l.Project, Title: l.Title}.String())
	if head == "" {
		return padDisplay(clipDisplay(id, n), n)
	}
	room := n - displayWidth(id) - displayWidth(labelSep)
	// A head clipped below four columns says nothing; a shorter one whole
	// still does ("api · 3f2a9c").
	if room < min(4, displayWidth(head)) {
		return padDisplay(clipDisplay(id, n), n)
	}
	return padDisplay(clipDisplay(head, room)+labelSep+id, n)
}

// Row layout.
const (
	// labelColumns is the session column's width on a wide terminal.
	labelColumns = 34
	// minTextColumns is what a row keeps for its words before the session
	// column gives up room.
	minTextColumns = 40
	timeColumns    = 12
)

// line is one timeline row: time, session label, what happened in words;
// with Details also seq, type and agent before the words, ids and digests
// after.
func (p *Printer) line(ev *aep.Event) string {
	data, _ := ev.DataMap()
	ts := Line(ev.Time)
	if t, err := time.Parse(time.RFC3339Nano, ev.Time); err == nil {
		loc := p.Loc
		if loc == nil {
			loc = time.Local
		}
		ts = t.In(loc).Format("15:04:05.000")
	}
	p.label("")
	cols := min(labelColumns, max(p.widest, 1))
	if p.Width > 0 {
		cols = max(min(cols, 12), min(cols, p.Width-timeColumns-4-minTextColumns))
	}
	session := padDisplay("-", cols)
	if sid := rowSession(ev); sid != "" {
		session = p.labelColumn(sid, cols)
	}
	typeColor, dim := rowColor(ev)
	words := p.phraser.Phrase(ev)
	if w := p.tokenWords(ev); w != "" {
		// The figures go last but are never the part clipped: the phrase
		// gives up its room first.
		w = labelSep + Line(w)
		room := SummaryRunes
		if p.Width > 0 && !p.Details {
			room = p.Width - timeColumns - 4 - cols
		}
		words = clipDisplay(clip(words, SummaryRunes), max(room-displayWidth(w), minTextColumns/2)) + w
	}
	var line string
	if p.Details {
		pos := "-"
		if ev.Seq != nil {
			pos = fmt.Sprintf("#%d", *ev.Seq)
		}
		line = fmt.Sprintf("%s  %s  %-6s %s %-12s %s · %s", p.paint(ansiDim, ts), session, pos,
			p.paint(typeColor, fmt.Sprintf("%-24s", Line(ev.Type))), Line(ev.Agent), clip(words, SummaryRunes), Line(details(ev, data)))
	} else {
		line = fmt.Sprintf("%s  %s  %s", p.paint(ansiDim, ts), session, p.paint(typeColor, clip(words, SummaryRunes)))
	}
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
	ruled := ""
	if req.Answerable() && (req.Deadline.IsZero() || req.Deadline.After(p.clock())) {
		ruled = p.Hints.ruled(ev.Session, ev.ID)
	}
	if !req.Deadline.IsZero() {
		left := req.Deadline.Sub(p.clock())
		if expired = left <= 0; expired {
			facts = append(facts, "expired "+HumanDuration(-left)+" ago")
		} else if ruled != "" {
			facts = append(facts, ruled)
		} else if req.Fate() != "" {
			facts = append(facts, req.Countdown(p.clock()))
		} else {
			facts = append(facts, "expires in "+HumanDuration(left))
		}
	}
	out := []string{indent + Line(strings.Join(facts, " · "))}
	if !p.Details {
		out = out[:0]
		if len(facts) > 1 {
			out = append(out, indent+Line(strings.Join(facts[1:], " · ")))
		}
	}
	for _, q := range req.QuestionLines() {
		out = append(out, indent+Line(q))
	}
	switch {
	case expired, ruled != "":
	case req.Answerable() && p.Hints.Watching:
	case req.Answerable():
		// Continuation lines go without the arrow, so the command pastes
		// whole.
		for i, l := range continued(Line(req.Command(p.RelayArg, p.label(req.Session).ID)), p.Width-displayWidth(indent)) {
			lead := indent
			if i > 0 {
				lead = strings.Repeat(" ", displayWidth(indent))
			}
			out = append(out, lead+p.paint(ansiBold, l))
		}
	default:
		out = append(out, indent+Line("answer it "+req.Where()+"; it cannot be answered from here"))
	}
	return out
}

// continued breaks a shell command into lines of at most width columns
// (0: one line), each but the last ending in " \\", so that pasted whole
// it still runs; a word wider than a line gets a line of its own.
func continued(cmd string, width int) []string {
	if width <= 0 || displayWidth(cmd) <= width {
		return []string{cmd}
	}
	var lines []string
	cur := ""
	for _, w := range shellWords(cmd) {
		switch {
		case cur == "":
			cur = w
		case displayWidth(cur)+1+displayWidth(w)+2 <= width:
			cur += " " + w
		default:
			lines = append(lines, cur+" \\")
			cur = "  " + w
		}
	}
	return append(lines, cur)
}

// shellWords splits a command ShellQuote built at the blanks outside its
// single quotes.
func shellWords(cmd string) []string {
	var words []string
	start, quoted := 0, false
	for i, r := range cmd {
		switch {
		case r == '\'':
			quoted = !quoted
		case r == ' ' && !quoted:
			if i > start {
				words = append(words, cmd[start:i])
			}
			start = i + 1
		}
	}
	if start < len(cmd) {
		words = append(words, cmd[start:])
	}
	return words
}

// Command is the respond command that answers r, ready to paste: the
// refusing option when offered (the safe default to show), else the first;
// the session by short, its label's short id, when given (respond takes
// it for the whole).
func (r *Request) Command(relayArg, short string) string {
	args := []string{"aep-kimi", "respond"}
	if relayArg != "" {
		args = append(args, "--relay", ShellQuote(relayArg))
	}
	if len(r.Questions()) > 0 {
		// N stands for a choice's number (QuestionLines shows them).
		args = append(args, "--choice", "N")
	} else if opt := r.Suggested(); opt != "" {
		args = append(args, "--option", ShellQuote(opt))
	} else {
		args = append(args, "--text", "'your answer'")
	}
	return strings.Join(append(args, ShellQuote(firstOf(short, r.Session)), ShellQuote(r.ID)), " ")
}

// QuestionLines are a form's questions for a terminal, numbered, each
// with its choices numbered as respond's --question and --choice take
// them; a text or label the record does not carry shows as its id. Their
// text is as the events carry it: print them through Line.
func (r *Request) QuestionLines() []string {
	qs := r.Questions()
	out := make([]string, 0, len(qs))
	for i, q := range qs {
		head := firstOf(q.Text, q.ID)
		if q.Multi {
			head += " (any of)"
		}
		choices := make([]string, 0, len(q.Choices)+1)
		for j, c := range q.Choices {
			choices = append(choices, fmt.Sprintf("%d %s", j+1, firstOf(c.Label, c.ID)))
		}
		if q.Other {
			choices = append(choices, "or your own words (--other)")
		}
		out = append(out, fmt.Sprintf("%d. %s: %s", i+1, oneLine(head), oneLine(strings.Join(choices, " · "))))
	}
	return out
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
// tokenFigure says whether k is a token figure, which rows say in words
// (usedWords and the session's TokenWords), never as a raw field.
func tokenFigure(k string) bool {
	switch k {
	case mapping.DataInputTokens, mapping.DataOutputTokens, mapping.DataContextTokens, mapping.DataContextLimit:
		return true
	}
	return false
}

func scalars(data map[string]any) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		if strings.HasSuffix(k, "_digest") || tokenFigure(k) {
			continue
		}
		var v string
		switch x := data[k].(type) {
		case string:
			v = x
		case bool:
			v = strconv.FormatBool(x)
		case json.Number:
			v = number(x)
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
	// A whole number of milliseconds, up to 2^53 (what the page's
	// JavaScript holds exactly): 100.0 is 100, as it is on the page.
	f, err := n.Float64()
	if err != nil || f < 0 || f != math.Trunc(f) || f > maxExactFloat {
		return 0, false
	}
	return time.Duration(f) * time.Millisecond, true
}

// maxExactFloat is 2^53, the largest integer a float64 holds exactly.
const maxExactFloat = 1 << 53

// number renders a JSON number as the page's JavaScript does (String of a
// double), so both say the same: 100.0 is 100, 1e-7 is 1e-7.
func number(n json.Number) string {
	f, err := n.Float64()
	if err != nil {
		return n.String()
	}
	switch abs := math.Abs(f); {
	case f == 0:
		return "0"
	case abs >= 1e-6 && abs < 1e21:
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
	sign := exp[:1]
	exp = strings.TrimLeft(exp[1:], "0")
	return mant + "e" + sign + exp
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

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
