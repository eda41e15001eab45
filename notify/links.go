package notify

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/relay"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Answer link refusals, the code of their JSON bodies.
const (
	CodeAnswerUsed    = "answer-used"
	CodeAnswerExpired = "answer-expired"
	CodeAnswerUnknown = "answer-unknown"
	CodeAnswerFailed  = "answer-undelivered"
	// CodeAnswerForbidden: the person the link answers for lost the right.
	CodeAnswerForbidden = "answer-forbidden"
	// CodeAnswerRefused: the agent's side refused the answer (a question
	// answered in Kimi's own UI meanwhile, an answer it cannot take).
	CodeAnswerRefused = "answer-refused"
	// CodeAnswerUnconfirmed: delivered, but the agent's side did not say
	// within respondTimeout whether it took the answer.
	CodeAnswerUnconfirmed = "answer-unconfirmed"
	// respondTimeout bounds handing an answer to the relay and waiting
	// for the agent's side to take it.
	respondTimeout = 10 * time.Second
)

// answerPageCSP lets the confirmation page show itself and post its form
// to itself, and nothing else: no script, no frame, no other origin.
const answerPageCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// AnswerLinks serves the answer links: a GET shows what the link answers
// with a button that POSTs it (a chat app fetching the link to preview it
// answers nothing); a POST answers, once.
func (n *Notifier) AnswerLinks() http.Handler {
	return http.HandlerFunc(n.serveAnswer)
}

// answerBody is a POST's JSON answer.
type answerBody struct {
	Answered bool   `json:"answered"`
	Option   string `json:"option,omitempty"`
	Session  string `json:"session,omitempty"`
	Request  string `json:"request,omitempty"`
	Code     string `json:"code,omitempty"`
	Error    string `json:"error,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

func (n *Notifier) serveAnswer(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	tok := strings.TrimPrefix(r.URL.Path, relay.AnswerPath)
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		n.confirmPage(w, tok)
	case http.MethodPost:
		n.answer(w, r, tok)
	default:
		h.Set("Allow", "GET, HEAD, POST")
		httpguard.WriteError(w, http.StatusMethodNotAllowed, wire.CodeMethod, "an answer link takes GET (to confirm) or POST (to answer)")
	}
}

// check reads a link's token and says whether it may still answer: the
// claims, or the refusal's status, code and words.
func (n *Notifier) check(tok string, now time.Time) (Claims, int, string, string) {
	c, err := n.signer.Check(tok, now)
	switch {
	case errors.Is(err, ErrTokenUsed):
		return c, http.StatusConflict, CodeAnswerUsed, "This answer link was used already: the request was answered from it."
	case errors.Is(err, ErrTokenExpired):
		// Say how the request ended when it is known (answered from
		// another link, say): its deadline is only the last way.
		if closed := n.requestClosed(c, now); closed != "" && closed != "expired" {
			return c, http.StatusGone, CodeAnswerExpired, noLongerWaits(closed)
		}
		return c, http.StatusGone, CodeAnswerExpired, "This answer link has expired: the request's time to answer is over."
	case err != nil:
		return c, http.StatusNotFound, CodeAnswerUnknown, "This is not an answer link this relay made (or it was copied incompletely)."
	}
	if closed := n.requestClosed(c, now); closed != "" {
		return c, http.StatusGone, CodeAnswerExpired, noLongerWaits(closed)
	}
	return c, 0, "", ""
}

// requestClosed says how the link's request ended ("" while it waits, or
// when the notifier no longer holds it).
func (n *Notifier) requestClosed(c Claims, now time.Time) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, req := n.request(DefaultCapture, c.Session, c.Request); req != nil {
		return req.Closed(now)
	}
	return ""
}

func noLongerWaits(closed string) string {
	return "This request no longer waits (" + closed + "): there is nothing left to answer."
}

func (n *Notifier) answer(w http.ResponseWriter, r *http.Request, tok string) {
	html := wantsHTML(r)
	now := n.cfg.Now()
	c, status, code, words := n.check(tok, now)
	if status == 0 {
		status, code, words = n.deliver(r.Context(), c, now)
	}
	if status != http.StatusOK {
		if html {
			title := "Not answered"
			if status == http.StatusAccepted {
				title = "Sent"
			}
			n.page(w, status, pageData{Title: title, Words: words})
			return
		}
		httpguard.WriteJSON(w, status, answerBody{Code: code, Error: code, Detail: words})
		return
	}
	if html {
		n.page(w, status, pageData{Title: "Answered", Words: "Answered " + n.optionWords(c) + ". You can close this page."})
		return
	}
	httpguard.WriteJSON(w, http.StatusOK, answerBody{Answered: true, Option: c.Option, Session: c.Session, Request: c.Request})
}

// deliver spends the token and answers through the relay.
func (n *Notifier) deliver(ctx context.Context, c Claims, now time.Time) (int, string, string) {
	ref := n.relay.Load()
	if ref == nil {
		return http.StatusServiceUnavailable, CodeAnswerFailed, "The relay is still starting; try again in a moment."
	}
	if err := n.signer.Use(c, now); errors.Is(err, ErrTokenUsed) {
		return http.StatusConflict, CodeAnswerUsed, "This answer link was used already: the request was answered from it."
	} else if err != nil {
		n.log.Warn("answer link not spent: not answering", "err", err)
		return http.StatusInternalServerError, CodeAnswerFailed, "The relay could not record the use of this link, so it did not answer."
	}
	ctx, cancel := context.WithTimeout(ctx, respondTimeout)
	defer cancel()
	n.mu.Lock()
	w := n.feed.await(c)
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		n.feed.unawait(w)
		n.mu.Unlock()
	}()
	// Links are minted only for people who may answer (compose); the
	// answer is theirs.
	err := ref.RespondAnswer(ctx, access.Principal{Name: c.By, Role: access.RoleAnswer, Token: access.ParseRef(c.Token)}, c.Surface, c.Session, c.Request, c.answer())
	var re *relay.RespondError
	switch {
	case err == nil:
		return n.settled(ctx, c, w)
	case errors.As(err, &re) && re.Code == wire.CodeNoRoute:
		// Nobody holds the session any more: the request is over.
		return http.StatusGone, CodeAnswerExpired, "This request no longer waits: its session is not connected to the relay."
	case errors.As(err, &re) && re.Code == wire.CodeForbidden:
		// The person it was made for may no longer answer: it never will.
		return http.StatusForbidden, CodeAnswerForbidden, "This link answers for " + c.By + ", who may no longer answer on this relay."
	}
	n.signer.Unuse(c)
	n.log.Warn("answer from a link not delivered", "session", c.Session, "request", c.Request, "err", err)
	return http.StatusServiceUnavailable, CodeAnswerFailed, "The answer could not be delivered (" + err.Error() + "); the link still works, try again."
}

// settled waits for the agent's side to take or refuse a delivered answer:
// the link says "answered" only once it did. A refused answer leaves the
// link unused (nothing was answered); one nobody confirmed stays spent,
// since the agent may still carry it out.
func (n *Notifier) settled(ctx context.Context, c Claims, w *settling) (int, string, string) {
	select {
	case ack := <-w.done:
		if ack.Type == typeAccepted {
			n.log.Info("answered from a link", "session", c.Session, "request", c.Request, "field", c.Field, "option", c.Option, "by", c.By, "surface", c.Surface)
			return http.StatusOK, "", ""
		}
		n.signer.Unuse(c)
		n.log.Info("an answer from a link was refused", "session", c.Session, "request", c.Request, "by", c.By)
		return http.StatusConflict, CodeAnswerRefused, "Not answered: the agent's side refused it (" + n.refusalWords(c, ack) + ")."
	case <-ctx.Done():
		n.log.Warn("an answer from a link was delivered but not confirmed", "session", c.Session, "request", c.Request, "by", c.By)
		return http.StatusAccepted, CodeAnswerUnconfirmed, "Your answer reached the agent's side, which has not confirmed it yet; look at the session before answering again."
	}
}

// refusalWords says why an answer was refused, as far as the link's
// ceiling lets it: the reason always, the detail where it is shown.
func (n *Notifier) refusalWords(c Claims, ack *aep.Event) string {
	var d map[string]any
	if low, err := aep.Downlevel(ack, n.linkCeiling(c)); err == nil {
		d, _ = low.DataMap()
	}
	reason, _ := d["reason"].(string)
	words := strings.ReplaceAll(consumer.Line(reason), "_", " ")
	if detail, _ := d["detail"].(string); detail != "" {
		words += ": " + consumer.Line(detail)
	}
	if words == "" {
		words = "no reason given"
	}
	return words
}

// optionWords names a token's option as the request labels it, a form's
// choice with the question it answers.
func (n *Notifier) optionWords(c Claims) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, req := n.request(DefaultCapture, c.Session, c.Request)
	if req == nil {
		return "“" + consumer.Line(c.Option) + "”"
	}
	opts := req.Options
	question := ""
	if c.Field != "" {
		opts = nil
		for i, f := range req.Fields {
			if f.ID == c.Field {
				opts, question = f.Choices, " to "+fieldWords(f, i)
			}
		}
	}
	for i, o := range opts {
		if o.ID == c.Option {
			return "“" + answerWords(o, i, c.Field != "") + "”" + question
		}
	}
	return "“" + consumer.Line(c.Option) + "”" + question
}

// confirmPage is a GET's answer: what the link would answer, and the
// button that does; or why it no longer can.
func (n *Notifier) confirmPage(w http.ResponseWriter, tok string) {
	now := n.cfg.Now()
	c, status, _, words := n.check(tok, now)
	if status != 0 {
		n.page(w, status, pageData{Title: "This link cannot answer", Words: words})
		return
	}
	what, asks := "a request", ""
	ceiling := n.linkCeiling(c)
	n.mu.Lock()
	s, req := n.request(ceiling, c.Session, c.Request)
	if req == nil {
		ceiling = DefaultCapture
		s, req = n.request(ceiling, c.Session, c.Request)
	}
	if req != nil {
		what = firstOf(subjectOf(s, req), whatIs(req, false)) + " in " + n.feed.fold(ceiling).Labels()[c.Session].String()
		asks = promptLine(req)
	}
	n.mu.Unlock()
	n.page(w, http.StatusOK, pageData{Title: "Answer " + n.optionWords(c) + "?", Words: "This answers " + what + " with " + n.optionWords(c) + ". Nothing is answered until you press the button.",
		Asks: asks, Button: "Answer " + n.optionWords(c)})
}

// linkCeiling is the most a link's confirmation page says: the capture
// ceiling of the person the link answers for, as it stands now, and never
// above redacted (free text through the redaction pipeline): a link is a
// bearer URL that may pass through a chat or a push service on its way.
func (n *Notifier) linkCeiling(c Claims) aep.Capture {
	ref := n.relay.Load()
	if ref == nil {
		return DefaultCapture
	}
	who, ok := ref.Person(access.Principal{Name: c.By, Role: access.RoleAnswer, Token: access.ParseRef(c.Token)})
	if !ok {
		return DefaultCapture
	}
	return min(who.Capture, aep.CaptureRedacted)
}

// pageData is what an answer link's page says: Asks is the request's own
// words (the command it answers, within the page's ceiling).
type pageData struct{ Title, Words, Asks, Button string }

var answerPage = template.Must(template.New("answer").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<meta name="referrer" content="no-referrer"><title>{{.Title}} · aep-kimi</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:2rem auto;padding:0 1rem}button{font:inherit;padding:.6rem 1.2rem}</style>
</head><body><h1>{{.Title}}</h1>{{if .Asks}}<p><code>{{.Asks}}</code></p>{{end}}<p>{{.Words}}</p>
{{if .Button}}<form method="post"><button type="submit">{{.Button}}</button></form>{{end}}
</body></html>
`))

func (n *Notifier) page(w http.ResponseWriter, status int, d pageData) {
	w.Header().Set("Content-Security-Policy", answerPageCSP)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = answerPage.Execute(w, d) // the client went away: nothing to do
}

// wantsHTML tells the confirmation page's form (a browser navigating)
// from a program posting (a service worker, ntfy, a chat's button).
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html") || r.Header.Get("Content-Type") == "application/x-www-form-urlencoded"
}
