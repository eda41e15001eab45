package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
	"github.com/aep-kimi/aep-kimi/relay/wire"
)

// Pending defaults.
const (
	// pendingReplayTimeout bounds one read of the relay's replay.
	pendingReplayTimeout = 15 * time.Second
	// pendingFilter asks the relay for just what the pending state needs:
	// the attention lifecycle, and session starts (titles) and ends.
	pendingFilter = `{"type":["attention.*","session.started","session.ended"]}`
)

// pendingCommand is `aep-kimi pending`: the attention requests that wait
// on a person across the fleet now, oldest first, from the relay's replay.
func pendingCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "pending",
		Summary: "list the attention requests waiting on you across the fleet",
		Forms:   []string{"[--relay URL] [--token-file F]"},
		About: "Lists the attention requests waiting on a person across every session the relay\n" +
			"holds, oldest first: session and title, request id, age, time left, prompt, options,\n" +
			"and the command that answers each (or where to answer it). Answered, resolved and\n" +
			"expired requests are left out.",
		Env:  []string{"AEP_TOKEN"},
		Exit: "Exit 0 (also when nothing is pending), 1 when the relay cannot be read, 2 usage.",
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			rc := relayClientFlags(fs, getenv)
			return func(ctx context.Context, _ []string) int { return runPending(ctx, *rc, getenv, io) }
		},
	}
}

// runPending prints what waits.
func runPending(ctx context.Context, rc relayClient, getenv func(string) string, io stdio) int {
	token, err := relayToken(getenv, rc.tokenFile)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi pending: %v\n", err)
		return 2
	}
	f, err := loadFleet(ctx, rc.url, token)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi pending: %v\n", err)
		return 1
	}
	now := time.Now()
	reqs := f.pending(now)
	if len(reqs) == 0 {
		fmt.Fprintln(io.out, "nothing waits on you")
		return 0
	}
	relayArg := ""
	if rc.url != envOr(getenv, "AEP_RELAY", DefaultRelayURL) {
		relayArg = displayURL(rc.url)
	}
	if len(reqs) == 1 {
		fmt.Fprintln(io.out, "1 request waits on you:")
	} else {
		fmt.Fprintf(io.out, "%d requests wait on you (oldest first):\n", len(reqs))
	}
	for _, r := range reqs {
		fmt.Fprintln(io.out)
		writePending(io.out, f, r, now, relayArg)
	}
	return 0
}

// writePending prints one pending request as a block: who asks, what, how
// long it has waited and has left, and how to answer it.
func writePending(w io.Writer, f *fleet, r *pendingRequest, now time.Time, relayArg string) {
	head := r.session
	if t := f.title(r.session); t != "" {
		head += " " + quoted(t)
	}
	fmt.Fprintf(w, "%s  request %s\n", consumer.Line(head), consumer.Line(r.id))
	prompt := r.prompt
	if r.kind != "" {
		prompt += " (" + r.kind + ")"
	}
	fmt.Fprintf(w, "  %s\n", clip(consumer.Line(oneLine(prompt)), tailSummaryRunes))
	facts := []string{"waiting " + humanDuration(max(now.Sub(r.at), 0))}
	if r.expires.IsZero() {
		facts = append(facts, "no deadline")
	} else {
		facts = append(facts, humanDuration(r.expires.Sub(now))+" left")
	}
	if len(r.options) > 0 {
		facts = append(facts, "options "+strings.Join(r.options, ", "))
	}
	fmt.Fprintf(w, "  %s\n", consumer.Line(strings.Join(facts, " · ")))
	if r.answerable {
		fmt.Fprintf(w, "  %s\n", consumer.Line(r.command(relayArg)))
	} else {
		fmt.Fprintf(w, "  answer it %s\n", consumer.Line(r.where()))
	}
}

// fleet is the attention state of every session a relay holds, derived from
// its replay: each session's events in (epoch, seq) order, deduplicated on id.
type fleet struct {
	sessions map[string]*fleetSession
}

type fleetSession struct {
	title    string
	requests map[string]*pendingRequest
}

// pendingRequest is one attention request and, once closed, how.
type pendingRequest struct {
	request
	prompt, kind string
	at           time.Time
	// closed says how the request ended (answered, resolved, expired,
	// session ended); empty while it waits.
	closed string
}

// loadFleet reads the relay's replay and derives the fleet's state.
func loadFleet(ctx context.Context, base, token string) (*fleet, error) {
	evs, err := readReplay(ctx, base, token, pendingFilter)
	if err != nil {
		return nil, err
	}
	return newFleet(evs), nil
}

// readReplay reads one replay pass of everything the relay holds (from=all,
// live=0) matching filter. Unlike tail it does not wait out an unreachable
// relay: the first failed connect is the answer.
func readReplay(ctx context.Context, base, token, filter string) ([]*aep.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, pendingReplayTimeout)
	defer cancel()
	var evs []*aep.Event
	var unreachable error
	t, err := client.NewTailer(client.TailConfig{
		URL: base, Token: token, Filter: filter, From: wire.From{All: true},
		OnEvent: func(ev *aep.Event) { evs = append(evs, ev) },
		OnStatus: func(st client.TailStatus) {
			if st.Kind == client.TailUnreachable {
				unreachable = st.Err
				cancel()
			}
		},
	})
	if err != nil {
		return nil, err
	}
	if err := t.Run(ctx); err != nil {
		return nil, err
	}
	switch {
	case unreachable != nil:
		return nil, fmt.Errorf("relay %s unreachable: %w", displayURL(base), unreachable)
	case ctx.Err() != nil:
		return nil, fmt.Errorf("relay %s: no complete replay within %s", displayURL(base), pendingReplayTimeout)
	}
	return evs, nil
}

// newFleet folds events into per-session attention state. Events are
// deduplicated on id and applied per session in (epoch, seq) order; an event
// without seq (a foreign emitter's) keeps its arrival place after the
// positioned event before it.
func newFleet(evs []*aep.Event) *fleet {
	type placed struct {
		ev      *aep.Event
		pos     wire.Position
		arrival int
	}
	seen := map[string]bool{}
	bySession := map[string][]placed{}
	last := map[string]wire.Position{}
	for i, ev := range evs {
		if ev.Session == "" || seen[ev.ID] {
			continue
		}
		seen[ev.ID] = true
		pos := last[ev.Session]
		if ev.Seq != nil {
			pos = wire.Position{Epoch: ev.EpochOrZero(), Seq: *ev.Seq}
			last[ev.Session] = pos
		}
		bySession[ev.Session] = append(bySession[ev.Session], placed{ev, pos, i})
	}
	f := &fleet{sessions: map[string]*fleetSession{}}
	for session, list := range bySession {
		sort.SliceStable(list, func(i, j int) bool {
			if list[i].pos != list[j].pos {
				return list[i].pos.Less(list[j].pos)
			}
			return list[i].arrival < list[j].arrival
		})
		s := &fleetSession{requests: map[string]*pendingRequest{}}
		f.sessions[session] = s
		for _, p := range list {
			s.apply(p.ev)
		}
	}
	return f
}

// apply advances a session's state by one event (AEP-0002 §7: lifecycle
// events name the request in subject).
func (s *fleetSession) apply(ev *aep.Event) {
	data, _ := ev.DataMap()
	closeReq := func(how string) {
		if r := s.requests[ev.Subject]; r != nil && r.closed == "" {
			r.closed = how
		}
	}
	switch ev.Type {
	case "session.started":
		if t := str(data, "label"); t != "" {
			s.title = oneLine(t)
		}
	case "session.ended":
		// An emitter closes its requests before the session ends; any it
		// did not close wait on nobody now.
		for _, r := range s.requests {
			if r.closed == "" {
				r.closed = "session ended"
			}
		}
	case "attention.requested":
		if _, dup := s.requests[ev.ID]; dup {
			return
		}
		r := &pendingRequest{request: parseRequest(ev, data), prompt: str(data, "prompt"), kind: str(data, "kind")}
		r.at, _ = time.Parse(time.RFC3339Nano, ev.Time)
		s.requests[ev.ID] = r
	case "attention.answered":
		closeReq("answered")
	case "attention.resolved":
		closeReq(firstOf(str(data, "resolution"), "resolved"))
	case "attention.timeout":
		closeReq("expired")
	}
}

func (f *fleet) title(session string) string {
	if s := f.sessions[session]; s != nil {
		return s.title
	}
	return ""
}

// state reports how a request stands at now: "" while it waits, else why it
// does not.
func (r *pendingRequest) state(now time.Time) string {
	if r.closed != "" {
		return r.closed
	}
	if !r.expires.IsZero() && !now.Before(r.expires) {
		return "expired"
	}
	return ""
}

// pending lists the requests waiting at now across the fleet (or in one
// session when session is given), oldest first.
func (f *fleet) pending(now time.Time, session ...string) []*pendingRequest {
	var out []*pendingRequest
	for name, s := range f.sessions {
		if len(session) > 0 && name != session[0] {
			continue
		}
		for _, r := range s.requests {
			if r.state(now) == "" {
				out = append(out, r)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.at.Equal(b.at) {
			return a.at.Before(b.at)
		}
		if a.session != b.session {
			return a.session < b.session
		}
		return a.id < b.id
	})
	return out
}
