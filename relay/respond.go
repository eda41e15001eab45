package relay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay/wire"
	"github.com/aep-kimi/aep-kimi/rules"
)

// RespondError is why Respond could not deliver an answer: the relay's
// refusal code (wire.CodeNoRoute, ...) and a sentence.
type RespondError struct{ Code, Detail string }

func (e *RespondError) Error() string { return e.Code + ": " + e.Detail }

// ErrWatchOnly refuses answering on a relay without a token.
var ErrWatchOnly = errors.New(watchOnlyDetail)

// Respond answers a held attention request as the person p, from
// a surface outside the relay's sockets (surface is the command's agent:
// "aep-kimi-link" for an answer link, "aep-kimi-push" for a phone's
// notification action). The command is routed as a socket's
// control.attention.respond is: to the session's one claimant (through
// another relay on a shared store), then held in the session's history and
// fanned out to watchers, the person stamped in mapping.ExtBy. It returns once
// the claimant has the command; the emitter's answer follows on the stream.
func (s *Server) Respond(ctx context.Context, p access.Principal, surface, session, request, option string) error {
	if option == "" {
		return errors.New("relay: respond needs a surface, session, request and option")
	}
	return s.RespondAnswer(ctx, p, surface, session, request, map[string]any{"option": option})
}

// RespondAnswer is Respond with the whole answer (AEP-0002 §5.3: option,
// text, or a form's values), as the command carries it.
func (s *Server) RespondAnswer(ctx context.Context, p access.Principal, surface, session, request string, answer map[string]any) error {
	if s.cfg.Token == "" {
		return ErrWatchOnly
	}
	if p.Name != access.OwnerName && s.cfg.People != nil {
		// The person as they stand now: a token revoked (or a role
		// lowered) since a link was made for them answers nothing.
		cur, ok := s.Person(p)
		if !ok {
			return &RespondError{Code: wire.CodeForbidden, Detail: fmt.Sprintf("%s no longer holds a token on this relay", p.Name)}
		}
		p = cur
	}
	if !p.Can(access.RoleAnswer) {
		return &RespondError{Code: wire.CodeForbidden, Detail: fmt.Sprintf("%s may not answer requests (role %s)", p.Name, p.Role)}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if session == "" || request == "" || len(answer) == 0 || surface == "" {
		return errors.New("relay: respond needs a surface, session, request and answer")
	}
	now := time.Now()
	host, _ := os.Hostname()
	cmd := &aep.Event{
		AEP: aep.Version, ID: aep.NewID(), Type: rules.CommandType, Time: aep.FormatTime(now),
		Source: aep.AgentSourceURI(host, surface), Agent: surface, Session: session,
		Subject: request, Cause: request,
	}
	if err := stampWho(cmd, p); err != nil {
		return fmt.Errorf("relay: respond: %w", err)
	}
	if err := cmd.SetData(map[string]any{"answer": answer}); err != nil {
		return fmt.Errorf("relay: respond: %w", err)
	}
	if err := aep.CheckEnvelope(cmd); err != nil {
		return fmt.Errorf("relay: respond: %w", err)
	}
	m, err := NewMessage(cmd, now)
	if err != nil {
		return fmt.Errorf("relay: respond: %w", err)
	}
	if code, detail := s.route(m); code != "" {
		s.metrics.commands.WithLabelValues(code).Inc()
		return &RespondError{Code: code, Detail: detail}
	}
	s.metrics.commands.WithLabelValues(resultRouted).Inc()
	s.backend.Ingest([]*Message{m})
	return nil
}

// Person is p as the relay admits them now: the owner, or a person of
// the tokens file while the token p was admitted with stands; false for
// anyone else (that token revoked since, though the name hold a new one).
// Notifications ask before they go to someone's device.
func (s *Server) Person(p access.Principal) (access.Principal, bool) {
	if p.Name == access.OwnerName {
		return access.Owner(), s.cfg.Token != ""
	}
	if s.cfg.People == nil {
		return access.Principal{}, false
	}
	return s.cfg.People.Current(p)
}
