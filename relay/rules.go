package relay

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/mapping"
	"github.com/aep-kimi/aep-kimi/relay/wire"
	"github.com/aep-kimi/aep-kimi/rules"
)

// Rules answer attention requests for the people who would: the relay
// evaluates them when it admits an attention.requested, and a deciding rule
// becomes an ordinary control.attention.respond from "rule:<id>", routed to
// the session's claimant like any command and admitted right behind the
// request, in the same batch. Every consumer therefore folds the request
// and its answer before it renders either, so a request a rule answered
// never shows as waiting; the emitter answers the held hook as if a person
// had, and its attention.answered names the rule in by.
//
// The relay is where the fleet meets: one rules file there covers every
// adapter and bridge publishing to it, and the answer travels the one path
// every other answer takes (routing, storage, acks), so nothing downstream
// needs to know rules exist to record them faithfully.

// Bounds of what the relay remembers for its rules.
const (
	// rulesAnsweredMemory is how many answered requests are remembered, so
	// a request delivered twice (an emitter resending after a lost ack) gets
	// the same command again rather than a second decision.
	rulesAnsweredMemory = 4096
	// rulesSourceAgent names the source of rule commands.
	rulesSourceAgent = "aep-kimi-rules"
)

// ruleState is the relay's side of the rules: the book, and the facts of
// the stream the rules read that a request does not carry itself.
type ruleState struct {
	book   *rules.Book
	source string
	log    *slog.Logger

	outcomes *prometheus.CounterVec

	mu       sync.Mutex
	cwd      map[string]string // session -> working directory ("" known absent)
	cwdOrder []string
	cwdCap   int
	answered map[string]*aep.Event // request source+id -> the rule's command
	ansOrder []string
}

// Rule outcomes, the labels of aepkimi_rules_requests_total.
const (
	ruleAnswered      = "answered"      // a rule allowed or denied it
	ruleAsk           = "ask"           // an ask rule kept it for a person
	ruleNone          = "none"          // no rule applies
	ruleHeld          = "held"          // an unknowable deny or ask rule kept it for a person
	ruleNoOption      = "no-option"     // the deciding rule's option is not offered
	ruleUndeliverable = "undeliverable" // the answer could not reach the claimant
)

func newRuleState(s *Server) *ruleState {
	if s.cfg.Rules == nil {
		return nil
	}
	host, _ := os.Hostname()
	rs := &ruleState{
		book:     s.cfg.Rules,
		source:   aep.AgentSourceURI(host, rulesSourceAgent),
		log:      s.log,
		cwd:      map[string]string{},
		cwdCap:   2 * s.cfg.MaxSessions,
		answered: map[string]*aep.Event{},
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aepkimi_rules_requests_total",
			Help: "Permission requests offered for control, by what the rules did (answered, ask, none, held, no-option, undeliverable).",
		}, []string{"outcome"}),
	}
	for _, o := range []string{ruleAnswered, ruleAsk, ruleNone, ruleHeld, ruleNoOption, ruleUndeliverable} {
		rs.outcomes.WithLabelValues(o)
	}
	s.metrics.reg.MustRegister(rs.outcomes, ruleCollector{rs.book})
	return rs
}

// applyRules runs the rules over a batch about to be admitted: it learns
// the sessions' working directories, and puts each deciding rule's
// command, already delivered to the claimant, right behind its request.
func (s *Server) applyRules(msgs []*Message) []*Message {
	rs := s.rules
	if rs == nil || s.cfg.Token == "" {
		return msgs
	}
	var out []*Message
	for i, m := range msgs {
		if out != nil {
			out = append(out, m)
		}
		var cmd *Message
		switch m.Type {
		case "session.started":
			rs.noteStart(m)
		case "attention.requested":
			cmd = s.ruleAnswer(m)
		}
		if cmd != nil {
			if out == nil {
				out = append(make([]*Message, 0, len(msgs)+1), msgs[:i+1]...)
			}
			out = append(out, cmd)
		}
	}
	if out == nil {
		return msgs
	}
	return out
}

// ruleAnswer decides one request by the rules and, when a rule answers it,
// delivers the answer to the session's claimant and returns it to be
// admitted; nil leaves the request to a person.
func (s *Server) ruleAnswer(m *Message) *Message {
	rs := s.rules
	ev, err := m.Envelope()
	if err != nil {
		return nil
	}
	asked, ok := rules.ReadRequest(ev)
	if !ok {
		return nil
	}
	now := time.Now()
	key := m.Source + "\n" + m.ID
	if prev := rs.answeredFor(key); prev != nil {
		// The same request again: the same answer, which the emitter
		// dedupes and acks as before.
		return s.deliverRuleCommand(prev, now)
	}
	if !asked.Deadline.IsZero() && !now.Before(asked.Deadline) {
		return nil
	}
	asked.Project, asked.ProjectKnown = s.sessionCwd(asked.Session)
	v := rs.book.Evaluate(asked.Request, false)
	switch {
	case v.Effect == rules.Ask:
		rs.book.Record(v, now)
		rs.outcomes.WithLabelValues(ruleAsk).Inc()
		return nil
	case !v.Decides():
		rs.book.Record(v, now)
		outcome := ruleNone
		if v.Held != nil {
			outcome = ruleHeld
		}
		rs.outcomes.WithLabelValues(outcome).Inc()
		return nil
	}
	cmd, ok := asked.Answer(v, rs.source, now)
	if !ok {
		rs.outcomes.WithLabelValues(ruleNoOption).Inc()
		rs.log.Warn("a rule decided a request that offers no option for it; a person answers", "rule", v.Rule.ID,
			"effect", v.Effect, "session", asked.Session, "request", asked.ID)
		return nil
	}
	out := s.deliverRuleCommand(cmd, now)
	if out == nil {
		return nil
	}
	rs.book.Record(v, now)
	rs.remember(key, cmd)
	rs.outcomes.WithLabelValues(ruleAnswered).Inc()
	return out
}

// deliverRuleCommand routes a rule's command to the session's claimant, as
// routeCommand routes a person's, and returns it to be admitted; nil when
// it could not be delivered (then nothing of it is stored).
func (s *Server) deliverRuleCommand(cmd *aep.Event, now time.Time) *Message {
	if cmd.SetExt(mapping.ExtBy, cmd.Agent) != nil { // the rule answers: "rule:<id>"
		return nil
	}
	m, err := NewMessage(cmd, now)
	if err != nil {
		return nil
	}
	if code, detail := s.route(m); code != "" {
		s.metrics.commands.WithLabelValues(code).Inc()
		s.rules.outcomes.WithLabelValues(ruleUndeliverable).Inc()
		s.log.Warn("a rule's answer could not reach the session's emitter; a person answers", "agent", cmd.Agent,
			"session", cmd.Session, "request", cmd.Subject, "code", code, "detail", detail)
		return nil
	}
	s.metrics.commands.WithLabelValues(resultRouted).Inc()
	return m
}

// ruleAgentRefusal says why ev may not be taken from a client: its agent
// names one of the relay's rules ("rule:<id>"), which only the relay's own
// commands do (stamped so in mapping.ExtBy, which is what consumers
// believe). "" when it may.
func ruleAgentRefusal(ev *aep.Event) string {
	if !strings.HasPrefix(ev.Agent, rules.AgentPrefix) {
		return ""
	}
	return fmt.Sprintf("agent %q is reserved: only the relay's own rules send as %s<id>", ev.Agent, rules.AgentPrefix)
}

// noteStart learns a session's working directory from its session.started
// (present at capture redacted and full only).
func (rs *ruleState) noteStart(m *Message) {
	ev, err := m.Envelope()
	if err != nil {
		return
	}
	data, _ := ev.DataMap()
	if cwd, _ := data["cwd"].(string); cwd != "" {
		rs.setCwd(m.Session, cwd)
	}
}

func (rs *ruleState) setCwd(session, cwd string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if _, known := rs.cwd[session]; !known {
		rs.cwdOrder = append(rs.cwdOrder, session)
		if len(rs.cwdOrder) > rs.cwdCap {
			delete(rs.cwd, rs.cwdOrder[0])
			rs.cwdOrder = rs.cwdOrder[1:]
		}
	}
	rs.cwd[session] = cwd
}

// sessionCwd is the session's working directory, when the stream said it:
// remembered from admission, else looked up once in the session's history
// (a relay restarted on a durable store, or a session.started admitted by
// another relay on a shared one).
func (s *Server) sessionCwd(session string) (string, bool) {
	rs := s.rules
	rs.mu.Lock()
	cwd, known := rs.cwd[session]
	rs.mu.Unlock()
	if !known {
		cwd = s.historyCwd(session, aep.CaptureFull)
		rs.setCwd(session, cwd)
	}
	return cwd, cwd != ""
}

// historyCwd reads the cwd of the latest session.started the store holds
// for session as a reader at ceiling is served it ("" when none says it).
func (s *Server) historyCwd(session string, ceiling aep.Capture) string {
	filter, err := aep.NewFilter(map[string]any{"session": session, "type": "session.started"})
	if err != nil {
		return ""
	}
	cwd := ""
	s.eachHeld(session, filter, func(ev *aep.Event) {
		ev, err := aep.Downlevel(ev, ceiling)
		if err != nil {
			return
		}
		if data, _ := ev.DataMap(); data != nil {
			if c, _ := data["cwd"].(string); c != "" {
				cwd = c
			}
		}
	})
	return cwd
}

// replayTaker keeps a subscription's replay and ignores live messages.
type replayTaker struct{ r *Replay }

func (t replayTaker) Start(r Replay) { *t.r = r }
func (replayTaker) Offer(*Message)   {}

func (rs *ruleState) answeredFor(key string) *aep.Event {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.answered[key]
}

func (rs *ruleState) remember(key string, cmd *aep.Event) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.answered[key] = cmd
	rs.ansOrder = append(rs.ansOrder, key)
	if len(rs.ansOrder) > rulesAnsweredMemory {
		delete(rs.answered, rs.ansOrder[0])
		rs.ansOrder = rs.ansOrder[1:]
	}
}

// serveRules is the rules API (rules.API) behind the token: changing rules
// needs an authenticated relay, and a browser request from another origin
// is refused (no page may change them on a visitor's behalf).
func (s *Server) serveRules(w http.ResponseWriter, r *http.Request) {
	if !httpguard.SameOrigin(r) {
		httpguard.WriteError(w, http.StatusForbidden, wire.CodeForbidden, "a request from another origin may not read or change rules")
		return
	}
	what := "changing rules"
	if strings.HasSuffix(r.URL.Path, "/propose") {
		what = "proposing a rule from a held request"
	}
	if !allow(w, r, rulesRole(r), what) {
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && s.cfg.Token == "" {
		httpguard.WriteError(w, http.StatusForbidden, wire.CodeUnauthorized, "this relay is watch-only (no AEP_TOKEN): rules answer nothing and cannot be changed")
		return
	}
	// What the API reads of a held request (its argument text, its
	// session's directory) it answers with: no more than the caller's
	// capture ceiling lets the stream serve them.
	ceiling, _ := admissionOf(r).ceiling()
	held := func(session, id string) (rules.Asked, string, bool) { return s.heldRequest(session, id, ceiling) }
	rules.API{Book: s.cfg.Rules, Request: held, Decided: s.ruleDecided, Hide: ceiling < aep.CaptureRedacted}.ServeHTTP(w, r)
}

// ruleDecided is what the rules answered a held request with when it
// arrived: the rule (by the agent its command names) and the effect of the
// option it chose.
func (s *Server) ruleDecided(a rules.Asked) (rules.Verdict, bool) {
	if s.rules == nil {
		return rules.Verdict{}, false
	}
	cmd := s.rules.answeredFor(a.Source + "\n" + a.ID)
	if cmd == nil {
		return rules.Verdict{}, false
	}
	var data struct {
		Answer struct {
			Option string `json:"option"`
		} `json:"answer"`
	}
	if err := json.Unmarshal(cmd.Data, &data); err != nil {
		return rules.Verdict{}, false
	}
	effect := rules.Allow
	if data.Answer.Option == a.Option(rules.Deny) {
		effect = rules.Deny
	}
	id := strings.TrimPrefix(cmd.Agent, rules.AgentPrefix)
	return rules.Verdict{Rule: &rules.Rule{ID: id, Effect: effect}, Effect: effect, Why: "rule " + id + " answered it when it arrived"}, true
}

// heldRequest finds an attention request in the session's history, as
// rules read it, with the session's working directory, both as a reader
// at ceiling is served them.
func (s *Server) heldRequest(session, id string, ceiling aep.Capture) (rules.Asked, string, bool) {
	filter, err := aep.NewFilter(map[string]any{"session": session, "type": "attention.requested"})
	if err != nil {
		return rules.Asked{}, "", false
	}
	var asked rules.Asked
	found := false
	s.eachHeld(session, filter, func(ev *aep.Event) {
		if ev.ID != id {
			return
		}
		if ev, err = aep.Downlevel(ev, ceiling); err == nil {
			asked, found = rules.ReadRequest(ev)
		}
	})
	if !found {
		return rules.Asked{}, "", false
	}
	cwd := ""
	switch {
	case s.rules == nil:
	case ceiling >= aep.CaptureFull:
		cwd, _ = s.sessionCwd(session)
	default:
		cwd = s.historyCwd(session, ceiling)
	}
	return asked, cwd, true
}

// eachHeld calls fn for each event of session's history the filter
// selects, in order; it reads what the store holds now and no more.
func (s *Server) eachHeld(session string, filter *aep.Filter, fn func(*aep.Event)) {
	var r Replay
	cancel, err := s.backend.Subscribe(SubscribeRequest{Filter: filter,
		From: wire.From{Positions: []wire.Resume{{Session: session, Position: wire.Position{Seq: -1}}}}}, replayTaker{&r})
	if err != nil {
		return
	}
	cancel()
	ctx, stop := context.WithTimeout(context.Background(), time.Second)
	defer stop()
	_ = r.Each(ctx, func(m *Message) error { // best effort: an error ends the reading
		if ev, err := m.Envelope(); err == nil {
			fn(ev)
		}
		return nil
	})
}

// ruleCollector reports each rule's uses on /metrics, labelled by rule id:
// the label set is bounded by the rules file (rules.MaxRules), and a
// removed rule's series goes with it.
type ruleCollector struct{ book *rules.Book }

var (
	ruleUsesDesc = prometheus.NewDesc("aepkimi_rules_uses_total",
		"Requests each rule decided (allow, deny) or kept for a person (ask), by rule id and effect.", []string{"rule", "effect"}, nil)
	ruleLastUseDesc = prometheus.NewDesc("aepkimi_rules_last_use_timestamp_seconds",
		"When each rule was last used (Unix seconds; absent before its first use).", []string{"rule"}, nil)
	rulesLoadedDesc = prometheus.NewDesc("aepkimi_rules_loaded",
		"Rules in force.", nil, nil)
	rulesFileOKDesc = prometheus.NewDesc("aepkimi_rules_file_ok",
		"1 when the rules file on disk is the one in force, 0 when it is refused (the last good rules stay; /healthz says why).", nil, nil)
)

func (c ruleCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- ruleUsesDesc
	ch <- ruleLastUseDesc
	ch <- rulesLoadedDesc
	ch <- rulesFileOKDesc
}

func (c ruleCollector) Collect(ch chan<- prometheus.Metric) {
	list := c.book.List()
	for _, r := range list {
		ch <- prometheus.MustNewConstMetric(ruleUsesDesc, prometheus.CounterValue, float64(r.Uses), r.ID, string(r.Effect))
		if !r.LastUse.IsZero() {
			ch <- prometheus.MustNewConstMetric(ruleLastUseDesc, prometheus.GaugeValue, float64(r.LastUse.UnixNano())/1e9, r.ID)
		}
	}
	st := c.book.Status()
	ch <- prometheus.MustNewConstMetric(rulesLoadedDesc, prometheus.GaugeValue, float64(len(list)))
	ok := 0.0
	if st.OK {
		ok = 1
	}
	ch <- prometheus.MustNewConstMetric(rulesFileOKDesc, prometheus.GaugeValue, ok)
}

// rulesHealth is the rules' part of an authorized /healthz.
func (s *Server) rulesHealth() json.RawMessage {
	if s.cfg.Rules == nil {
		return nil
	}
	st := s.cfg.Rules.Status()
	b, _ := json.Marshal(map[string]any{"ok": st.OK, "rules": st.Rules, "error": st.Error, "answering": s.cfg.Token != ""})
	return b
}
