package consumer

import (
	"encoding/json"
	"sort"
)

// Projection is the fold as JSON, the form fleetpage's state.js produces
// too (its projection function), so the Go and the page's folds are held
// to the same golden files. Absent facts are left out rather than empty;
// times are the events' own strings; runs are listed by id.
type Projection struct {
	Sessions map[string]SessionProjection `json:"sessions"`
}

// SessionProjection is one session in a Projection.
type SessionProjection struct {
	Agent   string `json:"agent,omitempty"`
	Title   string `json:"title,omitempty"`
	Cwd     string `json:"cwd,omitempty"`
	Project string `json:"project,omitempty"`
	// Label is the session's label among all the fold's sessions.
	Label     string              `json:"label"`
	Model     string              `json:"model,omitempty"`
	Started   string              `json:"started,omitempty"`
	Ended     string              `json:"ended,omitempty"`
	EndReason string              `json:"end_reason,omitempty"`
	Runs      []RunProjection     `json:"runs,omitempty"`
	Requests  []RequestProjection `json:"requests,omitempty"`
	// Open lists the requests without an outcome, in order of request.
	Open []string `json:"open,omitempty"`
	// Usage and Context are the session's token figures, when known.
	Usage   *UsageProjection   `json:"usage,omitempty"`
	Context *ContextProjection `json:"context,omitempty"`
}

// UsageProjection is a session's tokens used (Session.Usage) and the
// tokens it used in the hour up to its latest usage (Meter.BurnPerHour),
// when any.
type UsageProjection struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	BurnPerHour  int64 `json:"burn_per_hour,omitempty"`
}

// ContextProjection is how full a session's context is (Session.Context):
// Fill, the fraction in use, when its limit is known.
type ContextProjection struct {
	Tokens int64    `json:"tokens"`
	Limit  int64    `json:"limit,omitempty"`
	Fill   *float64 `json:"fill,omitempty"`
}

// RunProjection is one run in a Projection.
type RunProjection struct {
	ID         string      `json:"id"`
	State      string      `json:"state"`
	Started    string      `json:"started,omitempty"`
	Ended      string      `json:"ended,omitempty"`
	DurationMS json.Number `json:"duration_ms,omitempty"`
	Reason     string      `json:"reason,omitempty"`
	// Feedback is what people said of the run, in order.
	Feedback []FeedbackProjection `json:"feedback,omitempty"`
}

// FeedbackProjection is one rating of a run (Feedback).
type FeedbackProjection struct {
	Event   string   `json:"event"`
	Time    string   `json:"time,omitempty"`
	By      string   `json:"by,omitempty"`
	Surface string   `json:"surface,omitempty"`
	Rating  *float64 `json:"rating,omitempty"`
	Label   string   `json:"label,omitempty"`
	Comment string   `json:"comment,omitempty"`
	Source  string   `json:"source,omitempty"`
}

// RequestProjection is one attention request in a Projection.
type RequestProjection struct {
	ID         string         `json:"id"`
	Run        string         `json:"run,omitempty"`
	Kind       string         `json:"kind,omitempty"`
	Prompt     string         `json:"prompt,omitempty"`
	Options    []Option       `json:"options,omitempty"`
	RespondVia *[]string      `json:"respond_via,omitempty"`
	ExpiresAt  string         `json:"expires_at,omitempty"`
	OnExpiry   string         `json:"on_expiry,omitempty"`
	Requested  string         `json:"requested,omitempty"`
	State      string         `json:"state"`
	Answer     map[string]any `json:"answer,omitempty"`
	// Rule is the id of the rule whose command answered the request.
	Rule     string          `json:"rule,omitempty"`
	Answered *MarkProjection `json:"answered,omitempty"`
	Outcome  *MarkProjection `json:"outcome,omitempty"`
	// Routed lists where the request was sent, in arrival order.
	Routed []Route `json:"routed,omitempty"`
}

// MarkProjection is the event that answered or closed a request, and what
// caused it: the cause's type and agent say who answered.
type MarkProjection struct {
	Event      string `json:"event"`
	Type       string `json:"type"`
	Time       string `json:"time,omitempty"`
	By         string `json:"by,omitempty"`
	Via        string `json:"via,omitempty"`
	Resolution string `json:"resolution,omitempty"`
	Cause      string `json:"cause,omitempty"`
	CauseType  string `json:"cause_type,omitempty"`
	CauseAgent string `json:"cause_agent,omitempty"`
}

// Projection returns the fold as JSON-ready values.
func (f *Fold) Projection() Projection {
	p := Projection{Sessions: map[string]SessionProjection{}}
	labels := f.Labels()
	for _, id := range f.Sessions() {
		sp := f.Session(id).projection()
		sp.Label = labels[id].String()
		p.Sessions[id] = sp
	}
	return p
}

func (s *Session) projection() SessionProjection {
	sp := SessionProjection{Agent: s.Agent, Title: s.Title, Cwd: s.Cwd, Project: s.Project, Model: s.Model,
		Started: s.Started, Ended: s.Ended, EndReason: s.EndReason}
	for _, r := range s.Runs {
		rp := RunProjection{ID: r.ID, State: r.State, Started: r.Started, Ended: r.Ended,
			DurationMS: r.DurationMS, Reason: r.Reason}
		for _, f := range r.Feedback {
			rp.Feedback = append(rp.Feedback, FeedbackProjection{Event: f.Event, Time: f.Time, By: f.By, Surface: f.Surface,
				Rating: f.Rating, Label: f.Label, Comment: f.Comment, Source: f.Source})
		}
		sp.Runs = append(sp.Runs, rp)
	}
	sort.Slice(sp.Runs, func(i, j int) bool { return sp.Runs[i].ID < sp.Runs[j].ID })
	if u := s.Usage; u.Known {
		sp.Usage = &UsageProjection{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens, BurnPerHour: s.BurnPerHour()}
	}
	if c := s.Context; c.Known {
		sp.Context = &ContextProjection{Tokens: c.Tokens, Limit: c.Limit}
		if f, ok := c.Fill(); ok {
			sp.Context.Fill = &f
		}
	}
	for _, r := range s.Requests {
		rp := RequestProjection{ID: r.ID, Run: r.Run, Kind: r.Kind, Prompt: r.Prompt, Options: r.Options,
			ExpiresAt: r.ExpiresAt, OnExpiry: r.OnExpiry, Requested: r.Time, State: r.State(), Answer: r.Answer, Rule: r.Rule,
			Routed: r.Routed}
		if r.RespondVia != nil {
			via := r.RespondVia
			rp.RespondVia = &via
		}
		if a := r.Answered; a != nil {
			m := s.markProjection(a.Mark)
			m.By, m.Via = a.By, a.Via
			rp.Answered = &m
		}
		if o := r.Outcome; o != nil {
			m := s.markProjection(o.Mark)
			m.Resolution = o.Resolution
			rp.Outcome = &m
		}
		sp.Requests = append(sp.Requests, rp)
		if r.Outcome == nil {
			sp.Open = append(sp.Open, r.ID)
		}
	}
	return sp
}

func (s *Session) markProjection(m Mark) MarkProjection {
	mp := MarkProjection{Event: m.Event, Type: m.Type, Time: m.Time, Cause: m.Cause}
	if c := s.Event(m.Cause); c != nil {
		mp.CauseType, mp.CauseAgent = c.Type, c.Agent
	}
	return mp
}
