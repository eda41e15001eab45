package rules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
)

// The rules HTTP API, which the relay serves behind its token:
//
//	GET    /rules          {"status": Status, "rules": [Listed]}
//	POST   /rules          a Rule without id (or with one) -> 201 {"rule": Rule}
//	                       (?allow_destructive=1: see OverrideDestructive)
//	DELETE /rules/{id}     -> 200 {"removed": Rule}
//	POST   /rules/test     a Probe -> 200 {"verdict": Verdict}
//	POST   /rules/propose  a RequestRef -> 200 a Proposal: the rule an answer to that request would make
//	POST   /rules/always   an AlwaysBody -> 201 {"rule": Rule}: that rule, saved (Asked.Always;
//	                       ?allow_destructive=1 as for POST /rules)
//
// Errors are {"error": code, "detail": text} with these codes.
const (
	CodeInvalidRule = "invalid-rule"
	CodeInvalidJSON = "invalid-json"
	CodeRulesFile   = "rules-file"
	CodeNotFound    = "not-found"
	CodeTooLarge    = "payload-too-large"
	CodeMedia       = "unsupported-media-type"
	CodeBodyTimeout = "body-timeout"
	// CodeDestructive refuses an allow rule that would answer a
	// destructive command through a wildcard, unless the request says
	// OverrideDestructive.
	CodeDestructive = "destructive-allow"
)

// OverrideDestructive is the query parameter (=1) with which POST /rules
// and POST /rules/always save an allow rule that would answer destructive
// commands through a wildcard (WildDestructive): the person saving it has
// seen which, and means it.
const OverrideDestructive = "allow_destructive"

// APIPath is where the relay serves the API.
const APIPath = "/rules"

// bodyTimeout bounds reading one API body.
const bodyTimeout = 10 * time.Second

// maxAPIBody bounds one API body: one rule, or one probe.
const maxAPIBody = 64 << 10

// Probe is a request to try the rules on: `rules test`. Args and Project
// absent mean the request does not carry them; Capture, when set, is the
// capture level the request would have (below redacted it carries neither).
//
// Session and Request, when set, name a held attention request instead:
// the rules are tried on it as the relay reads it (its session's directory
// included), so a reader can tell a request a rule answers from one a
// person must.
type Probe struct {
	Session   string  `json:"session,omitempty"`
	RequestID string  `json:"request,omitempty"`
	Tool      string  `json:"tool"`
	Args      *string `json:"args,omitempty"`
	Project   *string `json:"project,omitempty"`
	Agent     string  `json:"agent,omitempty"`
	Capture   string  `json:"capture,omitempty"`
}

// Request is the request a probe describes.
func (p Probe) Request() (Request, error) {
	if strings.TrimSpace(p.Tool) == "" {
		return Request{}, errors.New("tool is missing")
	}
	req := Request{Tool: p.Tool, Agent: p.Agent}
	level := aep.CaptureFull
	if p.Capture != "" {
		var err error
		if level, err = aep.ParseCapture(p.Capture); err != nil {
			return Request{}, fmt.Errorf("capture %q: want none, metadata, redacted or full", p.Capture)
		}
	}
	if p.Args != nil && *p.Args != "" && level >= aep.CaptureRedacted {
		req.Args, req.ArgsCarried = *p.Args, true
		req.ArgsCut = strings.HasSuffix(*p.Args, "…")
	}
	if p.Project != nil && *p.Project != "" && level >= aep.CaptureRedacted {
		req.Project, req.ProjectKnown = *p.Project, true
	}
	return req, nil
}

// API serves a Book over HTTP. The caller authenticates and guards the
// requests (the relay's token, Host and Origin checks).
type API struct {
	Book *Book
	// Request finds an attention request the caller holds, as rules read
	// it, and its session's working directory ("" when the stream never
	// said it); ok false when there is no such request a rule could
	// answer. nil: the propose and always endpoints find nothing.
	Request func(session, id string) (a Asked, cwd string, ok bool)
	// Decided says what the rules decided for a held request when it
	// arrived (ok false: no rule answered it); a test of a held request
	// answers that rather than what the rules would decide now. nil: the
	// rules are evaluated now.
	Decided func(a Asked) (v Verdict, ok bool)
	// Hide keeps the rules' argument patterns and projects out of what the
	// API answers: the listing and a test's verdict blank them, saying so
	// (Listed.Hidden, Verdict.Hidden), and the verdict has no trace, whose
	// steps quote them. A rule saved
	// from an answer holds a command and a directory, which a reader below
	// the redacted capture ceiling is not served on the stream either.
	Hide bool
}

// RequestRef names a held attention request.
type RequestRef struct {
	Session string `json:"session"`
	Request string `json:"request"`
}

// Proposal is the rule an answer to a request would make by default: its
// tool and agent, a pattern for its argument text (Asked.Proposal; "*" when
// the request carries none, "" when nothing can be suggested that would
// not allow a destructive command through a wildcard), and its session's
// directory for scope project ("" when the stream never said it).
type Proposal struct {
	Tool        string `json:"tool"`
	Agent       string `json:"agent,omitempty"`
	Args        string `json:"args,omitempty"`
	ArgsCarried bool   `json:"args_carried"`
	Pattern     string `json:"pattern"`
	Project     string `json:"project,omitempty"`
	// Allow and Deny are the request's options that carry out each effect
	// ("" when it offers none).
	Allow string `json:"allow,omitempty"`
	Deny  string `json:"deny,omitempty"`
}

// AlwaysBody asks for the rule an answer makes (Asked.Always).
type AlwaysBody struct {
	RequestRef
	Option  string `json:"option"`
	Pattern string `json:"pattern"`
	Scope   string `json:"scope"`
}

// ServeHTTP routes the API's paths (APIPath and below).
func (a API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, _ := strings.CutPrefix(r.URL.Path, APIPath)
	switch {
	case rest == "" || rest == "/":
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			a.list(w)
		case http.MethodPost:
			a.add(w, r)
		default:
			methodNotAllowed(w, "GET, POST")
		}
	case rest == "/test" || rest == "/propose" || rest == "/always":
		if r.Method != http.MethodPost {
			methodNotAllowed(w, "POST")
			return
		}
		switch rest {
		case "/test":
			a.test(w, r)
		case "/propose":
			a.propose(w, r)
		default:
			a.always(w, r)
		}
	case strings.HasPrefix(rest, "/") && !strings.Contains(rest[1:], "/"):
		if r.Method != http.MethodDelete {
			methodNotAllowed(w, "DELETE")
			return
		}
		a.remove(w, rest[1:])
	default:
		httpguard.WriteError(w, http.StatusNotFound, CodeNotFound, "no such rules endpoint (GET/POST /rules, DELETE /rules/ID, POST /rules/test)")
	}
}

// Listing is GET /rules's answer.
type Listing struct {
	Status Status   `json:"status"`
	Rules  []Listed `json:"rules"`
}

func (a API) list(w http.ResponseWriter) {
	rules := a.Book.List()
	if rules == nil {
		rules = []Listed{}
	}
	if a.Hide {
		for i := range rules {
			rules[i].hide()
		}
	}
	httpguard.WriteJSON(w, http.StatusOK, Listing{Status: a.Book.Status(), Rules: rules})
}

func (a API) add(w http.ResponseWriter, r *http.Request) {
	var in Rule
	if !readJSON(w, r, &in) || refusedDestructive(w, r, in) {
		return
	}
	out, err := a.Book.Add(in)
	if err != nil {
		writeBookError(w, err)
		return
	}
	httpguard.WriteJSON(w, http.StatusCreated, map[string]Rule{"rule": out})
}

func (a API) remove(w http.ResponseWriter, id string) {
	gone, err := a.Book.Remove(id)
	if err != nil {
		writeBookError(w, err)
		return
	}
	httpguard.WriteJSON(w, http.StatusOK, map[string]Rule{"removed": gone})
}

func (a API) test(w http.ResponseWriter, r *http.Request) {
	var p Probe
	if !readJSON(w, r, &p) {
		return
	}
	var req Request
	if p.Session != "" || p.RequestID != "" {
		asked, cwd, ok := Asked{}, "", a.Request != nil && p.Session != "" && p.RequestID != ""
		if ok {
			asked, cwd, ok = a.Request(p.Session, p.RequestID)
		}
		if !ok {
			httpguard.WriteError(w, http.StatusNotFound, CodeNotFound, "no tool permission request with that session and id is held here")
			return
		}
		if a.Decided != nil {
			v, ok := a.Decided(asked)
			if !ok {
				v = Verdict{Why: "no rule answered this request when it arrived: a person answers it"}
			}
			if a.Hide {
				v.hide()
			}
			httpguard.WriteJSON(w, http.StatusOK, map[string]Verdict{"verdict": v})
			return
		}
		req = asked.Request
		if cwd != "" {
			req.Project, req.ProjectKnown = cwd, true
		}
	} else {
		var err error
		if req, err = p.Request(); err != nil {
			httpguard.WriteError(w, http.StatusBadRequest, CodeInvalidJSON, err.Error())
			return
		}
	}
	v := a.Book.Evaluate(req, !a.Hide)
	if a.Hide {
		v.hide()
	}
	httpguard.WriteJSON(w, http.StatusOK, map[string]Verdict{"verdict": v})
}

// find reads a RequestRef body and looks the request up; false means the
// error is answered.
func (a API) find(w http.ResponseWriter, r *http.Request, ref *RequestRef, body any) (Asked, string, bool) {
	if !readJSON(w, r, body) {
		return Asked{}, "", false
	}
	var asked Asked
	var cwd string
	ok := a.Request != nil && ref.Session != "" && ref.Request != ""
	if ok {
		asked, cwd, ok = a.Request(ref.Session, ref.Request)
	}
	if !ok {
		httpguard.WriteError(w, http.StatusNotFound, CodeNotFound, "no tool permission request with that session and id is held here")
	}
	return asked, cwd, ok
}

func (a API) propose(w http.ResponseWriter, r *http.Request) {
	var ref RequestRef
	asked, cwd, ok := a.find(w, r, &ref, &ref)
	if !ok {
		return
	}
	p := Proposal{Tool: asked.Tool, Agent: asked.Agent, ArgsCarried: asked.ArgsCarried, Pattern: "*", Project: cwd,
		Allow: asked.Option(Allow), Deny: asked.Option(Deny)}
	if asked.ArgsCarried {
		p.Args = asked.Args
	}
	p.Pattern, _ = asked.Proposal()
	httpguard.WriteJSON(w, http.StatusOK, p)
}

func (a API) always(w http.ResponseWriter, r *http.Request) {
	var body AlwaysBody
	asked, cwd, ok := a.find(w, r, &body.RequestRef, &body)
	if !ok {
		return
	}
	rule, err := asked.Always(body.Option, body.Pattern, body.Scope, cwd)
	if err != nil {
		httpguard.WriteError(w, http.StatusBadRequest, CodeInvalidRule, err.Error())
		return
	}
	if refusedDestructive(w, r, rule) {
		return
	}
	out, err := a.Book.Add(rule)
	if err != nil {
		writeBookError(w, err)
		return
	}
	httpguard.WriteJSON(w, http.StatusCreated, map[string]Rule{"rule": out})
}

// refusedDestructive refuses, with 422 and CodeDestructive, an allow rule
// that would answer destructive commands through a wildcard when the
// request does not say OverrideDestructive; true means it is answered.
func refusedDestructive(w http.ResponseWriter, r *http.Request, rule Rule) bool {
	forms := WildDestructive(rule)
	if len(forms) == 0 || r.URL.Query().Get(OverrideDestructive) == "1" {
		return false
	}
	httpguard.WriteError(w, http.StatusUnprocessableEntity, CodeDestructive, DestructiveRefusal(rule, forms))
	return true
}

// DestructiveRefusal says why a wildcard allow is not saved as it stands,
// and how to save it anyway.
func DestructiveRefusal(rule Rule, forms []DestructiveForm) string {
	names := make([]string, len(forms))
	for i, f := range forms {
		names[i] = f.String()
	}
	const most = 6
	if len(names) > most {
		names = append(names[:most], fmt.Sprintf("and %d more", len(forms)-most))
	}
	return fmt.Sprintf("%s would also allow destructive commands: %s; name the command exactly, or save it anyway with %s=1 "+
		"(aep-kimi rules add --allow-destructive, respond --always ... --allow-destructive)", Describe(rule), strings.Join(names, ", "), OverrideDestructive)
}

func writeBookError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrInvalid):
		httpguard.WriteError(w, http.StatusBadRequest, CodeInvalidRule, err.Error())
	case errors.Is(err, ErrNotFound):
		httpguard.WriteError(w, http.StatusNotFound, CodeNotFound, err.Error())
	default:
		httpguard.WriteError(w, http.StatusConflict, CodeRulesFile, err.Error())
	}
}

// readJSON reads one bounded JSON object body into v, strictly; false
// means the error is answered.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		httpguard.WriteError(w, http.StatusUnsupportedMediaType, CodeMedia, "Content-Type must be application/json")
		return false
	}
	body, err := httpguard.ReadBody(w, r, maxAPIBody, bodyTimeout)
	if err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			httpguard.WriteError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("body exceeds %d bytes", maxAPIBody))
		case errors.Is(err, httpguard.ErrBodyTimeout):
			httpguard.WriteError(w, http.StatusRequestTimeout, CodeBodyTimeout, err.Error())
		default:
			httpguard.WriteError(w, http.StatusBadRequest, CodeInvalidJSON, "could not read the request body")
		}
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		httpguard.WriteError(w, http.StatusBadRequest, CodeInvalidJSON, jsonError(body, err).Error())
		return false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		httpguard.WriteError(w, http.StatusBadRequest, CodeInvalidJSON, "text after the JSON object")
		return false
	}
	return true
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	httpguard.WriteError(w, http.StatusMethodNotAllowed, "method-not-allowed", "allowed: "+allow)
}
