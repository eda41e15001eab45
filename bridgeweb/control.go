package bridgeweb

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/emitter"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// normalizeOption maps a sent option id to the declared one, "" if unknown.
func normalizeOption(o string) string {
	o = strings.ToLower(strings.TrimSpace(o))
	// The other words a sender may use for an option: the hook adapter's
	// gate vocabulary, and imperative forms.
	switch o {
	case OptApprove, "approve", "allow":
		return OptApprove
	case OptApproveSession, "approve_session", "allow_session":
		return OptApproveSession
	case OptReject, "reject", "deny":
		return OptReject
	}
	return ""
}

// matchOption applies AEP-0008 to a text-only answer (aep.MatchOption).
func matchOption(text string) string {
	id, _ := aep.MatchOption(approvalOptions(), text)
	return id
}

// vendorDecision is what an option posts: the decision word and the scope.
func vendorDecision(option string) (decision, scope string) {
	switch option {
	case OptApproveSession:
		return "approved", "session"
	case OptApprove:
		return "approved", ""
	}
	return "rejected", ""
}

// unsupported says why a command type the bridge does not accept now is
// refused (emitter.Spec.Unsupported).
func (b *Bridge) unsupported(typ string) string {
	switch {
	case typ != CmdRespond && typ != CmdCancel:
		return fmt.Sprintf("%s is not a command bridge-web knows", typ)
	case b.cfg.Mode != mapping.Primary:
		return "bridge-web in companion mode accepts no commands: the hook adapter owns this session's control"
	}
	return "control is off (AEP_KIMI_WEB_CONTROL=1 turns it on)"
}

// Decide carries out a command the core found authenticated, accepted and
// valid on the kap-server, when it can be honoured (emitter.Source.Decide).
// The outcome is emitted when the server's broadcast shows it: the caller
// holds s's lock, so that broadcast is mapped after the ack.
func (src source) Decide(ctx context.Context, s *webSession, cmd *aep.Event) emitter.Verdict {
	b := src.b
	data, _ := cmd.DataMap()
	var al *activeLink
	if s.owner != nil {
		al = s.owner.active.Load()
	}
	var reason, detail string
	switch cmd.Type {
	case CmdRespond:
		reason, detail = b.respond(ctx, s, al, cmd, data)
	case CmdCancel:
		reason, detail = b.cancel(ctx, s, al, cmd, data)
	default:
		reason = "unsupported"
	}
	return emitter.Verdict{Reason: reason, Detail: detail}
}

// respond posts an approval decision. AEP-0008: text naming an option is
// that option; any other text never approves: it rejects, with the text as
// the feedback Kimi shows the model.
func (b *Bridge) respond(ctx context.Context, s *webSession, al *activeLink, cmd *aep.Event, data map[string]any) (string, string) {
	ask := s.m.byReq[cmd.Subject]
	switch {
	case cmd.Subject != "" && ask == nil && s.m.closed[cmd.Subject] != "":
		return "refused", "the question was already " + s.m.closed[cmd.Subject]
	case cmd.Subject == "" || ask == nil:
		return "invalid", "no open attention request with this subject (it may have been answered already)"
	case ask.question && !ask.options:
		return "refused", "this question was not offered for control (respond_via oob): answer it in Kimi's own UI"
	case !ask.options:
		return "refused", "this request was not offered for control; answer it in Kimi's UI"
	case ask.question:
		return b.answerQuestion(ctx, s, al, cmd, ask, data)
	}
	answer, _ := data["answer"].(map[string]any)
	option, _ := answer["option"].(string)
	text, _ := answer["text"].(string)
	if option == "" && strings.TrimSpace(text) == "" {
		return "invalid", "an approval takes an answer option or text"
	}
	if option != "" {
		if option = normalizeOption(option); option == "" {
			return "invalid", fmt.Sprintf("unknown option (%s, %s, %s)", OptApprove, OptApproveSession, OptReject)
		}
	} else if option = matchOption(text); option != "" {
		text = "" // the word was the decision itself
	} else {
		option = OptReject // unmatched text never approves
	}
	decision, scope := vendorDecision(option)
	if al == nil {
		return "busy", "not connected to the kap-server"
	}
	body := map[string]any{"decision": decision}
	if scope != "" {
		body["scope"] = scope
	}
	if t := strings.TrimSpace(text); t != "" {
		body["feedback"] = t
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RESTTimeout)
	defer cancel()
	ok, err := al.kap.decideApproval(rctx, s.kap(), ask.vendorID, body)
	if err != nil {
		return "busy", kapFailure(err)
	}
	if !ok {
		return "invalid", "the approval was already resolved"
	}
	by, surface := mapping.CommandSender(cmd)
	ask.decision = &pendingCmd{cmdID: cmd.ID, by: by, surface: surface, option: option, decision: decision}
	return "", ""
}

// answerQuestion posts an answer to a question, or dismisses it
// (docs/questions.md). An answer kap-server refuses because the question no
// longer waits (answered or dismissed in Kimi's own UI first) is refused:
// the outcome is on the stream already, or on its way.
func (b *Bridge) answerQuestion(ctx context.Context, s *webSession, al *activeLink, cmd *aep.Event, ask *askRec, data map[string]any) (string, string) {
	if pc := ask.decision; pc != nil {
		// Ours reached kap-server already and its broadcast is on its way:
		// a second post would be refused there as if Kimi's UI had
		// answered, or, were it taken, answer the question twice.
		return "refused", "the question was already " + closedWords(pc.decision, pc.by, pc.surface)
	}
	answer, _ := data["answer"].(map[string]any)
	qa, err := readQuestionAnswer(ask.questions, answer)
	if err != nil {
		return "invalid", err.Error()
	}
	if al == nil {
		return "busy", "not connected to the kap-server"
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RESTTimeout)
	defer cancel()
	decision := questionAnswered
	if qa.dismiss {
		decision = questionDismissed
		err = al.kap.dismissQuestion(rctx, s.kap(), ask.vendorID)
	} else {
		err = al.kap.answerQuestion(rctx, s.kap(), ask.vendorID, qa.answers)
	}
	switch {
	case errors.Is(err, errQuestionClosed):
		return "refused", "the question was already answered or dismissed in Kimi's own UI"
	case err != nil:
		return "busy", kapFailure(err)
	}
	by, surface := mapping.CommandSender(cmd)
	ask.decision = &pendingCmd{cmdID: cmd.ID, by: by, surface: surface, decision: decision, values: qa.values}
	return "", ""
}

// cancel aborts the running turn's prompt. Scope session is refused: a kimi
// session has no end to command (abort cancels work; archive only shelves).
func (b *Bridge) cancel(ctx context.Context, s *webSession, al *activeLink, cmd *aep.Event, data map[string]any) (string, string) {
	switch scope, _ := data["scope"].(string); scope {
	case "session":
		return "refused", "a kimi session has no end to command; cancel scope run aborts the running turn"
	case "run":
	default:
		return "invalid", "scope must be run or session"
	}
	run := s.m.mainRun()
	switch {
	case run == nil:
		return "invalid", "no run in progress"
	case cmd.Run != "" && cmd.Run != run.id:
		return "invalid", "that run is not the one in progress"
	case run.cancel != nil:
		return "refused", "a cancel of this run is already under way"
	case al == nil:
		return "busy", "not connected to the kap-server"
	}
	rctx, cancel := context.WithTimeout(ctx, b.cfg.RESTTimeout)
	defer cancel()
	prompt, err := al.kap.activePrompt(rctx, s.kap())
	if err != nil {
		return "busy", kapFailure(err)
	}
	if prompt == "" {
		return "invalid", "the kap-server has no prompt running"
	}
	aborted, err := al.kap.abortPrompt(rctx, s.kap(), prompt)
	if err != nil {
		return "busy", kapFailure(err)
	}
	if !aborted {
		return "invalid", "the kap-server did not abort the prompt"
	}
	by, surface := mapping.CommandSender(cmd)
	run.cancel = &pendingCmd{cmdID: cmd.ID, by: by, surface: surface}
	return "", ""
}

// kapFailure describes a failed REST call for a rejection detail.
func kapFailure(err error) string {
	var ke *KapError
	switch {
	case errors.Is(err, ErrUnauthorized):
		return "the kap-server refused the bridge's token"
	case errors.As(err, &ke):
		return fmt.Sprintf("the kap-server answered %d: %s", ke.Code, emitter.Clip(ke.Msg))
	}
	return "the kap-server did not answer"
}
