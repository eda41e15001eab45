package consumer

import (
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/client"
)

// Who names the sender of an answer or a command the way a person reads it:
// the page and the terminal are "you", a relay's rule is that rule, anyone
// else their own name.
func Who(agent string) string {
	switch {
	case agent == mapping.AgentPage:
		return "you from the page"
	case agent == client.SenderAgent:
		return "you from the terminal"
	case strings.HasPrefix(agent, mapping.RuleAgentPrefix):
		return "rule " + strings.TrimPrefix(agent, mapping.RuleAgentPrefix)
	}
	return agent
}

// AnswererWords names who answered, from an answer's data: the person and the
// surface they answered through ("alice (page)"), or, for an answer that
// names no surface, Who its by.
func AnswererWords(data map[string]any) string {
	by := str(data, "by")
	if s := str(data, mapping.DataSurface); s != "" && by != "" {
		return mapping.SenderWords(by, s)
	}
	return Who(by)
}

// Sender names who sent a command: the person the relay stamped on it and
// the surface its agent names ("alice (page)"), a rule, or, on a command
// no relay stamped, Who its agent.
func Sender(ev *aep.Event) string {
	by, surface := mapping.CommandSender(ev)
	if surface == "" {
		return Who(by)
	}
	return mapping.SenderWords(by, surface)
}

// Phraser says what events mean in plain words, one phrase per event. It
// remembers who answered each request so a refusal names them. fleetpage's
// state.js phrases the same way (its phraser function); both are held to
// testdata/phrases. The zero value is ready to use.
type Phraser struct {
	// answeredBy maps an attention.answered's id to who answered, in
	// words (AnswererWords), per session, forgotten when the session ends.
	answeredBy map[string]map[string]string
}

// timedOut stands for nobody among the answerers a Phraser remembers.
const timedOut = "\x00"

func (ph *Phraser) remember(ev *aep.Event, by string) {
	if ph.answeredBy == nil {
		ph.answeredBy = map[string]map[string]string{}
	}
	if ph.answeredBy[ev.Session] == nil {
		ph.answeredBy[ev.Session] = map[string]string{}
	}
	ph.answeredBy[ev.Session][ev.ID] = by
}

// Phrase says what ev means, fit for a terminal (through Line).
func (ph *Phraser) Phrase(ev *aep.Event) string { return Line(ph.words(ev)) }

// words is the phrase as data: what the golden phrases hold.
func (ph *Phraser) words(ev *aep.Event) string {
	data, _ := ev.DataMap()
	switch ev.Type {
	case "attention.answered":
		if str(data, "by") != "" {
			ph.remember(ev, AnswererWords(data))
		}
	case "attention.timeout":
		ph.remember(ev, timedOut)
	case "session.ended":
		defer delete(ph.answeredBy, ev.Session)
	}
	return oneLine(ph.phrase(ev, data))
}

func (ph *Phraser) phrase(ev *aep.Event, data map[string]any) string {
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
		if str(data, "trigger") == "resume" {
			add("session resumed")
		} else {
			add("session started")
		}
		add(quoted(str(data, "label")))
		add(str(data, "gen_ai.request.model"))
		lifecycleText(ev, add)
	case "session.ended":
		s := "session ended"
		if r := str(data, "reason"); r != "" && r != "normal" {
			s += " (" + r + ")"
		}
		add(s)
		took("after ")
		if n, ok := data["runs"].(json.Number); ok {
			add(plural(number(n), "turn"))
		}
		lifecycleText(ev, add)
	case "agent.presence":
		add("agent " + firstOf(str(data, "state"), "present"))
	case "agent.health":
		add("health " + firstOf(str(data, "status"), "reported"))
		detail := str(data, "detail")
		if ch, ok := ev.ExtString(mapping.ExtChannel); ok && detail == "" {
			detail = "hook channel " + ch
		}
		add(detail)
	case "session.compacted":
		s := "context compacted"
		if t := str(data, "trigger"); t != "" {
			s += " (" + t + ")"
		}
		add(s)
		if n, ok := data["estimated_token_count"].(json.Number); ok {
			add("~" + plural(number(n), "token"))
		}
	case "run.started":
		add("turn started")
		add(quoted(str(data, "prompt")))
	case "run.finished":
		add("turn finished")
		took("in ")
	case "run.failed":
		add("turn failed: " + errorText(data, firstOf(str(data, "reason"), "unknown error")))
		took("after ")
	case "run.cancelled":
		s := "turn cancelled"
		if by := str(data, "by"); by != "" {
			s += " by " + Who(by)
		}
		add(s)
		took("after ")
	case "tool.requested":
		add("calls " + toolName(ev, data) + argsWords(data))
	case "tool.completed":
		s := "ran " + toolName(ev, data)
		if d, ok := millis(data, "duration_ms"); ok {
			s += " in " + HumanDuration(d)
		}
		add(s)
		add(resultText(data))
	case "tool.failed":
		add(toolName(ev, data) + " failed: " + errorText(data, "unknown error"))
		took("after ")
	case "tool.denied":
		add(toolName(ev, data) + " denied" + ph.deniedBy(ev, data))
	case "attention.requested":
		add(firstOf(str(data, "prompt"), "asks for "+firstOf(str(data, "kind"), "an answer")))
	case "attention.routed":
		add("sent to " + RouteWords(str(data, "to")))
	case "attention.answered":
		s := "answered " + firstOf(answerText(data), "(no answer)")
		if str(data, "by") != "" {
			s += " by " + AnswererWords(data)
		} else if str(data, "via") == "oob" {
			s += " in Kimi"
		}
		add(s)
	case "attention.resolved":
		switch r := str(data, "resolution"); r {
		case "answered":
			s := "settled"
			if d, ok := millis(data, "latency_ms"); ok {
				s += " after " + HumanDuration(d)
			}
			add(s)
		default:
			add(firstOf(r, "closed"))
			add(parenthesized(str(data, "reason")))
		}
	case "attention.timeout":
		add(timeoutWords(data))
	case "control.accepted":
		add("command accepted")
	case "control.rejected":
		add("command refused: " + strings.ReplaceAll(firstOf(str(data, "reason"), "rejected"), "_", " "))
		add(str(data, "detail"))
	case "control.attention.respond":
		add("answer sent: " + firstOf(answerText(data), "(no answer)") + " by " + firstOf(Sender(ev), "someone"))
	case "control.cancel":
		add("cancel sent by " + firstOf(Sender(ev), "someone"))
	case mapping.TypeRate:
		add("rating sent: " + ratingWords(data) + " by " + firstOf(Sender(ev), "someone"))
	case mapping.TypeFeedback:
		s := "rated " + ratingWords(data)
		if by := str(data, mapping.DataBy); by != "" {
			s += " by " + mapping.SenderWords(by, str(data, mapping.DataSurface))
		}
		add(s)
		add(quoted(str(data, "comment")))
	default:
		if strings.HasPrefix(ev.Type, "error.") {
			add("error: " + errorText(data, typeWords(ev.Type)))
			add(ev.Subject)
			break
		}
		if w, ok := strings.CutPrefix(ev.Type, webTypePrefix); ok {
			add("kimi web: " + strings.TrimPrefix(strings.NewReplacer(".", " ", "_", " ").Replace(w), "event "))
		} else {
			add(typeWords(ev.Type))
		}
		add(ev.Subject)
		add(usedWords(data))
		add(scalars(data))
	}
	return strings.Join(parts, " · ")
}

// ratingWords is a rating's verdict in words: a feedback's label
// ("thumbs down"), else its number, or a rate command's.
func ratingWords(data map[string]any) string {
	if l := str(data, "label"); l != "" {
		return strings.ReplaceAll(l, "_", " ")
	}
	n, ok := data["rating"].(json.Number)
	if !ok {
		return "(no rating)"
	}
	switch f, _ := n.Float64(); f {
	case 1:
		return "thumbs up"
	case -1:
		return "thumbs down"
	}
	return number(n)
}

// webTypePrefix begins the kimi web bridge's own event types.
const webTypePrefix = "x." + mapping.Vendor + ".web."

// usedWords is the tokens an event's own work used ("110 tokens"), or "".
func usedWords(data map[string]any) string {
	var n int64
	known := false
	for _, k := range []string{mapping.DataInputTokens, mapping.DataOutputTokens} {
		if c, ok := tokenCount(data, k); ok {
			n, known = n+c, true
		}
	}
	if !known {
		return ""
	}
	return CompactCount(n) + " tokens"
}

// deniedBy says who refused a tool call: a rule, the person who answered,
// or Kimi's own permission flow.
func (ph *Phraser) deniedBy(ev *aep.Event, data map[string]any) string {
	if r := str(data, "rule"); r != "" {
		return " by rule " + r
	}
	switch str(data, "by") {
	case mapping.DeniedByRuntime:
		return " in Kimi"
	case mapping.DeniedByPolicy:
		switch by := ph.answeredBy[ev.Session][ev.Cause]; by {
		case timedOut:
			return ": nobody answered"
		case "":
		default:
			return " by " + by
		}
		return " by an answer"
	}
	return ""
}

// timeoutWords says what happened when nobody answered.
func timeoutWords(data map[string]any) string {
	s := "nobody answered"
	if d, ok := millis(data, "after_ms"); ok {
		s += " in " + HumanDuration(d)
	}
	switch str(data, mapping.DataOnExpiry) {
	case mapping.OnExpiryDeny:
		return "denied: " + s
	case mapping.OnExpiryAllow:
		if str(data, "reason") == mapping.TimeoutHookEnded {
			return "proceeded: Kimi stopped waiting, " + s
		}
		return "proceeded: " + s
	}
	return "expired: " + s
}

// argsWords is ": SUMMARY" from the arguments the event carries, or "".
func argsWords(data map[string]any) string {
	for _, k := range []string{"args", "args_redacted"} {
		if s := mapping.ArgsSummary(data[k]); s != "" {
			return ": " + s
		}
	}
	return ""
}

// typeWords is an event type a person can read: the vendor prefix and
// category gone, underscores and dots as blanks
// ("x.kimi-code.run.turn_started" is "turn started").
func typeWords(typ string) string {
	segs := strings.Split(typ, ".")
	switch {
	case len(segs) >= 4 && segs[0] == "x":
		segs = segs[3:]
	case len(segs) == 3 && segs[0] == "x":
		segs = segs[2:]
	case len(segs) >= 2:
		segs = segs[1:]
	}
	return strings.ReplaceAll(strings.Join(segs, " "), "_", " ")
}

// details is what the terminal shows with --details beside the phrase:
// ids and digests, the facts a person pastes or compares.
func details(ev *aep.Event, data map[string]any) string {
	parts := []string{"id " + ev.ID}
	if ev.Cause != "" {
		parts = append(parts, "cause "+ev.Cause)
	}
	if ev.Type == "control.attention.respond" && ev.Subject != "" {
		parts = append(parts, "request "+ev.Subject)
	}
	keys := make([]string, 0, len(data))
	for k := range data {
		if strings.HasSuffix(k, "_digest") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v := str(data, k); v != "" {
			parts = append(parts, strings.TrimSuffix(k, "_digest")+" "+v)
		}
	}
	return strings.Join(parts, " · ")
}

// RouteWords names where an attention.routed sent a request: a device by
// its person and name ("alice's Pixel 8" for "push:alice's Pixel 8"),
// anything else as its router named it; "someone" when it did not say.
func RouteWords(to string) string {
	if d, ok := strings.CutPrefix(to, "push:"); ok && d != "" {
		return d
	}
	return firstOf(to, "someone")
}

// SentWords is where r was last sent and how long before now ("sent to
// alice's Pixel 8 3s ago"), "" when it was not.
func (r *Request) SentWords(now time.Time) string {
	if len(r.Routed) == 0 {
		return ""
	}
	last := r.Routed[len(r.Routed)-1]
	s := "sent to " + RouteWords(last.To)
	if at, err := time.Parse(time.RFC3339Nano, last.Time); err == nil {
		s += " " + HumanDuration(max(now.Sub(at), 0).Round(time.Second)) + " ago"
	}
	return s
}
