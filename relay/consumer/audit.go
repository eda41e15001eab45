package consumer

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/rules"
)

// Surfaces an outcome came through, as the audit names them.
const (
	SurfacePage    = "page"
	SurfaceCLI     = "cli"
	SurfacePush    = "push"
	SurfaceLink    = "link"
	SurfaceRule    = "rule"
	SurfaceTimeout = "timeout"
	// SurfaceKimi: answered in Kimi's own UI (respond_via oob).
	SurfaceKimi = "kimi"
)

// Nobody is who decided a request nobody answered.
const Nobody = "nobody"

// surfaceWords are the surfaces a person answers through, in words.
var surfaceWords = map[string]string{
	SurfacePage: "from the page", SurfaceCLI: "from the terminal", SurfacePush: "from a phone", SurfaceLink: "through an answer link",
}

// Words says the row's outcome in a line, as the page says it (state.js
// settledWords): "denied by alice from a phone", "allowed by rule r3",
// "proceeded: nobody answered". Its text is as the events carry it.
func (r AuditRow) Words() string {
	switch r.Surface {
	case SurfaceRule:
		return r.Outcome + " by rule " + r.By
	case SurfaceTimeout:
		return r.Outcome + ": nobody answered"
	case SurfaceKimi:
		return r.Outcome + " in Kimi"
	}
	switch {
	case r.By == Nobody && r.Outcome == OutcomeSessionEnded:
		return "closed: the session ended first"
	case r.By == Nobody:
		return r.Outcome + ": nobody answered"
	case r.By != "" && r.Surface != "":
		if w, ok := surfaceWords[r.Surface]; ok {
			return r.Outcome + " by " + r.By + " " + w
		}
		return r.Outcome + " by " + r.By + " (" + r.Surface + ")"
	case r.By != "":
		return r.Outcome + " by " + r.By
	case r.Surface != "":
		return strings.TrimSpace(r.Outcome + " " + surfaceWords[r.Surface])
	}
	return r.Outcome
}

// Settlement is what became of r, as the audit records it; false while r
// waits on a person.
func (s *Session) Settlement(r *Request) (AuditRow, bool) {
	return s.auditRow(r)
}

// Answerer says who sent an answer and through what: by is the person's
// name (the relay's stamp, else a sender that names itself), a rule's id,
// or "" when the record does not say who; surface one of the Surface
// words, or "" for a sender aep-kimi does not know. agent is the answering
// command's agent (attention.answered's by when the command is not at
// hand), stamped the relay's mapping.ExtBy on it. Only the stamp names a
// rule: an agent is whatever its sender wrote.
func Answerer(agent, stamped string) (by, surface string) {
	if id, ok := rules.RuleOfAgent(stamped); ok {
		return id, SurfaceRule
	}
	if s, ok := mapping.SurfaceOf(agent); ok {
		return stamped, s
	}
	return firstOf(stamped, agent), ""
}

// AuditRow is one attention request's outcome: when it was decided, the
// request, what became of it, who decided it, through which surface, and
// how long it waited. Text fields are as the events carry them; writers
// sanitize what they print.
type AuditRow struct {
	// Time is when the outcome was recorded (the answer, the rule's
	// command, the timeout or the close), Requested when it was asked.
	Time      string `json:"time"`
	Session   string `json:"session"`
	Label     string `json:"label"`
	Request   string `json:"request"`
	Requested string `json:"requested"`
	Tool      string `json:"tool,omitempty"`
	// Summary is what the request asked, within its capture: the tool's
	// argument text, else its prompt, clipped to SummaryRunes.
	Summary string `json:"summary,omitempty"`
	// Outcome is a word for what became of it (Outcome* constants, or
	// "answered OPTION"); Option the option applied, when one was.
	Outcome string `json:"outcome"`
	Option  string `json:"option,omitempty"`
	// By is the person, the rule id, Nobody, or "" when the record does
	// not say who; Surface how (Surface* constants, "" unknown).
	By string `json:"by"`
	// Token is the ID of the token the person answered with, as the relay
	// stamped it (mapping.ExtByToken; `aep-kimi token list` shows it):
	// two tokens one name held in turn are told apart. "" for the owner,
	// a rule, or a record that does not say.
	Token   string `json:"token,omitempty"`
	Surface string `json:"surface"`
	// LatencyMS is how long the request waited for its outcome: the
	// emitter's own measure when it recorded one.
	LatencyMS int64 `json:"latency_ms"`
}

// Outcome words besides "answered OPTION".
const (
	OutcomeAllowed        = "allowed"
	OutcomeAllowedSession = "allowed for the session"
	OutcomeDenied         = "denied"
	OutcomeCancelled      = "cancelled"
	OutcomeAnswered       = "answered"
	// OutcomeProceeded: nobody answered and the call ran anyway.
	OutcomeProceeded = "proceeded"
	OutcomeExpired   = "expired"
	// OutcomeDismissed: closed unanswered (the session or its emitter
	// stopped, or a person dismissed a question); OutcomeSessionEnded: its
	// session ended with it open.
	OutcomeDismissed    = "dismissed"
	OutcomeSessionEnded = "session ended"
)

// optionOutcomes are the words of the options the gate and kimi web offer.
var optionOutcomes = map[string]string{
	"allow": OutcomeAllowed, "approve": OutcomeAllowed, "approved": OutcomeAllowed,
	"allow_session": OutcomeAllowedSession,
	"deny":          OutcomeDenied, "reject": OutcomeDenied, "rejected": OutcomeDenied,
	"cancel": OutcomeCancelled,
	// A form's dismiss (a Kimi question closed unanswered: docs/questions.md).
	"dismiss": OutcomeDismissed,
}

func optionOutcome(option string) string {
	if option == "" {
		return OutcomeAnswered
	}
	if o, ok := optionOutcomes[strings.ToLower(option)]; ok {
		return o
	}
	return OutcomeAnswered + " " + option
}

// Audit lists the outcome of every request the fold holds that has one,
// recorded at since or later (zero: all), oldest first. A request still
// waiting has no row.
func (f *Fold) Audit(since time.Time) []AuditRow {
	labels := f.Labels()
	var out []AuditRow
	for _, id := range f.Sessions() {
		s := f.Session(id)
		for _, r := range s.Requests {
			row, ok := s.auditRow(r)
			if !ok {
				continue
			}
			if !since.IsZero() {
				if at, err := time.Parse(time.RFC3339Nano, row.Time); err == nil && at.Before(since) {
					continue
				}
			}
			row.Label = labels[id].String()
			out = append(out, row)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		ta, _ := time.Parse(time.RFC3339Nano, a.Time)
		tb, _ := time.Parse(time.RFC3339Nano, b.Time)
		if !ta.Equal(tb) {
			return ta.Before(tb)
		}
		if a.Session != b.Session {
			return a.Session < b.Session
		}
		return a.Request < b.Request
	})
	return out
}

// auditRow is r's row, ok false while r waits on a person.
func (s *Session) auditRow(r *Request) (AuditRow, bool) {
	row := AuditRow{Session: r.Session, Request: r.ID, Requested: r.Time}
	row.Tool, row.Summary = s.asked(r)
	var end Mark
	switch {
	case r.Answered != nil:
		end = r.Answered.Mark
		row.Option = answerOption(r.Answer)
		agent, stamped := r.Answered.By, ""
		cmd := s.Event(r.Answered.Cause)
		if cmd != nil && cmd.Type != rules.CommandType {
			cmd = nil
		}
		if cmd != nil {
			agent = cmd.Agent
			stamped, _ = cmd.ExtString(mapping.ExtBy)
		} else if _, ok := rules.RuleOfAgent(agent); ok {
			// The command is not at hand: the emitter's by is the stamp
			// the relay put on it (mapping.CommandSender).
			stamped = agent
		}
		if r.Answered.Via == "oob" && agent == "" {
			row.Surface = SurfaceKimi
		} else {
			row.By, row.Surface = Answerer(agent, stamped)
			if cmd != nil && row.Surface != SurfaceRule {
				row.Token, _ = cmd.ExtString(mapping.ExtByToken)
			}
			if row.Surface == "" {
				// The command is not at hand (a session log): the
				// answer names its surface itself.
				row.Surface = r.Answered.Surface
			}
		}
		row.Outcome = optionOutcome(row.Option)
	case r.Rule != "":
		// The rule's command, before its emitter says it applied it.
		end = r.Ruled
		if cmd := s.Event(r.Ruled.Event); cmd != nil {
			data, _ := cmd.DataMap()
			ans, _ := data["answer"].(map[string]any)
			row.Option = answerOption(ans)
		}
		row.By, row.Surface, row.Outcome = r.Rule, SurfaceRule, optionOutcome(row.Option)
	case r.Outcome != nil:
		end = r.Outcome.Mark
		row.By = Nobody
		switch r.State() {
		case StateTimeout:
			row.Surface = SurfaceTimeout
			switch s.eventData(end.Event)[mapping.DataOnExpiry] {
			case mapping.OnExpiryAllow:
				row.Outcome = OutcomeProceeded
			case mapping.OnExpiryDeny:
				row.Outcome = OutcomeDenied
			default:
				row.Outcome = OutcomeExpired
			}
		case StateResolved:
			row.Outcome = firstOf(r.Outcome.Resolution, OutcomeDismissed)
		default:
			row.Outcome = OutcomeSessionEnded
		}
	default:
		return AuditRow{}, false
	}
	row.Time = end.Time
	row.LatencyMS = s.latency(r, end)
	return row, true
}

// asked is the tool a request asks about and what it asks, within the
// capture it was recorded at.
func (s *Session) asked(r *Request) (tool, summary string) {
	ev := s.Event(r.ID)
	if ev == nil {
		return "", clip(oneLine(r.Prompt), SummaryRunes)
	}
	data, _ := ev.DataMap()
	if t, ok := data["tool"].(map[string]any); ok {
		tool = str(t, "name")
	}
	if tool == "" && r.Kind == "permission" {
		tool = ev.Subject
	}
	summary = r.Prompt
	if tool != "" && ev.CaptureLevel() >= aep.CaptureRedacted {
		if args, _, ok := mapping.PromptArgs(r.Prompt, tool); ok {
			summary = args
		}
	}
	return tool, clip(oneLine(summary), SummaryRunes)
}

// latency is how long r waited until end: the emitter's measure on r's
// terminal (latency_ms, a timeout's after_ms) when it recorded one, else
// the two events' times apart.
func (s *Session) latency(r *Request, end Mark) int64 {
	if o := r.Outcome; o != nil {
		data := s.eventData(o.Event)
		for _, k := range []string{"latency_ms", "after_ms"} {
			if n, ok := data[k].(json.Number); ok {
				if v, err := n.Int64(); err == nil && v >= 0 {
					return v
				}
			}
		}
	}
	at, err := time.Parse(time.RFC3339Nano, end.Time)
	if err != nil || r.At.IsZero() {
		return 0
	}
	return max(at.Sub(r.At).Milliseconds(), 0)
}

func (s *Session) eventData(id string) map[string]any {
	ev := s.Event(id)
	if ev == nil {
		return nil
	}
	data, _ := ev.DataMap()
	return data
}

func answerOption(answer map[string]any) string { return str(answer, "option") }

// AuditColumns are the audit's fields in the order the CSV writes them.
var AuditColumns = []string{"time", "session", "label", "request", "requested", "tool", "summary", "outcome", "option", "by", "surface", "latency_ms", "token"}

func (r AuditRow) cells() []string {
	return []string{r.Time, r.Session, r.Label, r.Request, r.Requested, r.Tool, r.Summary, r.Outcome, r.Option, r.By, r.Surface, strconv.FormatInt(r.LatencyMS, 10), r.Token}
}

// sanitized is r with every text field through Line.
func (r AuditRow) sanitized() AuditRow {
	for _, p := range []*string{&r.Time, &r.Session, &r.Label, &r.Request, &r.Requested, &r.Tool, &r.Summary, &r.Outcome, &r.Option, &r.By, &r.Token, &r.Surface} {
		*p = Line(*p)
	}
	return r
}

// WriteAuditJSON writes one JSON object per row, every text field through
// Line.
func WriteAuditJSON(w io.Writer, rows []AuditRow) error {
	enc := json.NewEncoder(w)
	for _, r := range rows {
		if err := enc.Encode(r.sanitized()); err != nil {
			return err
		}
	}
	return nil
}

// WriteAuditCSV writes the rows as RFC 4180 CSV (CRLF line ends, a header
// row), every cell through Line and defused: a cell a spreadsheet would
// read as a formula gets a leading apostrophe.
func WriteAuditCSV(w io.Writer, rows []AuditRow) error {
	cw := csv.NewWriter(w)
	cw.UseCRLF = true
	if err := cw.Write(AuditColumns); err != nil {
		return err
	}
	for _, r := range rows {
		cells := r.sanitized().cells()
		for i, c := range cells {
			cells[i] = DefuseCell(c)
		}
		if err := cw.Write(cells); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// DefuseCell keeps a spreadsheet from reading a cell as a formula: one that
// starts with = + - @ (or a tab or carriage return, which some strip
// first) gets a leading apostrophe.
func DefuseCell(c string) string {
	if c != "" && strings.ContainsRune("=+-@\t\r", rune(c[0])) {
		return "'" + c
	}
	return c
}

// auditTimeLayout is the text table's time: UTC to the second, as the
// record is compared across machines.
const auditTimeLayout = "2006-01-02 15:04:05Z"

// auditLabelRunes and auditSummaryRunes bound the text table's widest
// columns; JSON and CSV carry them whole.
const (
	auditLabelRunes   = 40
	auditSummaryRunes = 60
)

// WriteAuditText writes the rows as a table for people: time (UTC), session,
// request, outcome, by, surface, latency.
func WriteAuditText(w io.Writer, rows []AuditRow) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintln(w, "no attention request has an outcome yet")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSESSION\tREQUEST\tOUTCOME\tBY\tVIA\tWAITED")
	for _, r := range rows {
		when := r.Time
		if at, err := time.Parse(time.RFC3339Nano, r.Time); err == nil {
			when = at.UTC().Format(auditTimeLayout)
		}
		// The tool, then its arguments; a prompt that names the tool
		// itself (the arguments were not captured) stands alone.
		request := firstOf(r.Summary, r.Tool)
		if r.Tool != "" && r.Summary != "" && !strings.Contains(r.Summary, r.Tool) {
			request = r.Tool + ": " + r.Summary
		}
		by := r.By
		if r.Surface == SurfaceRule {
			by = "rule " + by
		}
		cells := []string{when, clip(r.Label, auditLabelRunes), clip(firstOf(request, r.Request), auditSummaryRunes),
			r.Outcome, firstOf(by, "-"), firstOf(r.Surface, "-"), HumanDuration(time.Duration(r.LatencyMS) * time.Millisecond)}
		for i, c := range cells {
			cells[i] = oneLine(Line(c)) // a tab would break the table's columns
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// ParseSince reads --since: a duration back from now ("90m", "24h", "7d"),
// an RFC 3339 time, or a date (midnight UTC).
func ParseSince(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, errors.New("empty --since")
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseUint(days, 10, 16); err == nil {
			return now.Add(-time.Duration(n) * 24 * time.Hour), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--since %s: a negative duration", Line(s))
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("--since %s: want a duration (90m, 24h, 7d), an RFC 3339 time or a date (2006-01-02)", Line(s))
}
