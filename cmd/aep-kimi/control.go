package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/relay/client"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
	"github.com/aep-kimi/aep-kimi/rules"
)

// Exit codes of the command senders. respond checks its target against the
// relay's replay first, so a mistyped id fails fast with its own code.
const (
	exitAccepted       = 0
	exitRejected       = 3
	exitNoAck          = 4
	exitUnknownSession = 5
	exitUnknownRequest = 6
	exitNotPending     = 7
	exitSeveralPending = 8
)

// senderExitCodes documents the exit codes every sender shares.
const senderExitCodes = "Exit codes: 0 accepted, 1 failure (e.g. relay unreachable), 2 usage, 3 rejected (the reason\n" +
	"on stderr), 4 no ack within the window."

// senderOptions are the flags every command sender shares.
type senderOptions struct {
	*relayClient
	window time.Duration
}

func (o *senderOptions) flags(fs *flag.FlagSet, getenv func(string) string) {
	o.relayClient = relayConnFlags(fs, getenv)
	fs.DurationVar(&o.window, "window", client.DefaultAckWindow, "how long to wait for the target's ack")
}

// requireToken reads the relay token, which every command needs: control only flows
// on authenticated bindings, and makes the HTTP client that reaches the
// relay. ok false means the error is printed.
func (o senderOptions) requireToken(name string, io stdio) (string, *http.Client, bool) {
	token, err := o.token()
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", name, err)
		return "", nil, false
	}
	if token == "" {
		fmt.Fprintf(io.err, "aep-kimi %s: no relay token (set AEP_TOKEN or --token-file): control only flows on authenticated bindings\n", name)
		return "", nil, false
	}
	hc, err := o.http()
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", name, err)
		return "", nil, false
	}
	return token, hc, true
}

// send delivers a command and maps its settlement to an exit code: 0
// accepted, 3 rejected (the reason on stderr), 4 no ack within the window.
func (o senderOptions) send(ctx context.Context, name string, cmd *aep.Event, io stdio) int {
	token, hc, ok := o.requireToken(name, io)
	if !ok {
		return 2
	}
	res, err := client.SendCommand(ctx, o.url, token, hc, cmd, o.window)
	switch {
	case errors.Is(err, client.ErrNoAck):
		fmt.Fprintf(io.err, "aep-kimi %s: no ack within %s (command %s)\n", name, o.window, cmd.ID)
		return exitNoAck
	case err != nil:
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", name, err)
		return 1
	case res.Accepted():
		fmt.Fprintf(io.out, "accepted %s (command %s)\n", cmd.Type, cmd.ID)
		return exitAccepted
	}
	fmt.Fprintf(io.err, "aep-kimi %s: %s\n", name, consumer.Line(res.Rejection()))
	return exitRejected
}

// sendBuilt sends a command a client builder made; its error is a command
// that cannot be sent (exit 2).
func (o senderOptions) sendBuilt(ctx context.Context, name string, cmd *aep.Event, err error, io stdio) int {
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", name, err)
		return 2
	}
	return o.send(ctx, name, cmd, io)
}

// respondCommand answers an attention request: aep-kimi respond --option
// ID [--text T] SESSION [REQUEST_ID]. Without REQUEST_ID it answers the
// session's one pending request.
func respondCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "respond",
		Summary: "answer an agent's attention request through the relay",
		Forms: []string{"[--relay URL] --option ID [--text T] [--always PATTERN [--scope project|all] [--allow-destructive]] SESSION [REQUEST_ID]",
			"[--relay URL] [--question N] (--choice C | --other TEXT)... SESSION [REQUEST_ID]"},
		About: "Answers an attention request through the relay. Without REQUEST_ID it answers the\n" +
			"session's one pending request (see aep-kimi pending); `aep-kimi tail` prints the\n" +
			"full command for each request it shows.\n\n" +
			"A question Kimi asks (its AskUserQuestion tool) takes --choice, a choice's number as\n" +
			"pending shows it or its label, repeated for a question that takes several, and --other\n" +
			"for your own words where the question takes them; --question N (default 1) names the\n" +
			"question the --choice and --other after it answer, so one command answers them all.\n" +
			"--option dismiss dismisses the question (see docs/questions.md).\n\n" +
			"--always also saves the answer as a rule (see aep-kimi rules), so the next request of\n" +
			"this tool whose arguments match PATTERN (a glob; '*' for any) is answered the same way\n" +
			"at once, in this session's project (--scope project, the default) or in every one.\n" +
			"pending proposes a pattern for each request, never wider than the command's risk (a\n" +
			"destructive command, rm -rf ./build, exactly). An allow whose wildcard would also allow\n" +
			"destructive commands (see aep-kimi rules add) needs --allow-destructive. The rule is saved\n" +
			"once the answer is accepted.",
		Env: []string{"AEP_TOKEN"},
		Exit: senderExitCodes + "\n" +
			"Before sending, respond checks the target against the relay's replay: 5 unknown\n" +
			"session, 6 unknown request, 7 nothing to answer (the request is closed or answered\n" +
			"in Kimi itself, or the session has no pending request), 8 several pending (name one).\n" +
			"A choice or question the request does not have is 2 before anything is sent.\n" +
			"With --always, a rule that cannot be made from the answer is 2 before anything is sent,\n" +
			"and one the relay refuses to save after the answer was accepted is 1.",
		Examples: []string{"aep-kimi respond --option deny SESSION", "aep-kimi respond --option allow --text 'just this once' SESSION REQUEST_ID",
			"aep-kimi respond --option allow --always 'go test *' SESSION REQUEST_ID",
			"aep-kimi respond --choice 2 SESSION", "aep-kimi respond --choice staging --question 2 --choice 1 --other 'the on-call' SESSION"},
		Args: cli.Args{Min: 1, Max: 2},
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o senderOptions
			o.flags(fs, getenv)
			option := fs.String("option", "", "the option id to answer with (e.g. allow, allow_session, deny, cancel; approved/rejected on kimi web)")
			text := fs.String("text", "", "free text: a reason, or (alone) text naming an option")
			var a alwaysOptions
			fs.StringVar(&a.pattern, "always", "", "also save the answer as a rule for this tool's requests whose arguments match this glob ('*': any)")
			fs.StringVar(&a.scope, "scope", rules.ScopeProject, "the saved rule's reach: project (this session's working directory and below) or all")
			fs.BoolVar(&a.destructive, "allow-destructive", false, "with --always: save the rule even though its wildcard would also allow destructive commands")
			var q questionFlags
			q.bind(fs)
			return func(ctx context.Context, args []string) int {
				return runRespond(ctx, o, *option, *text, a, &q, args, io)
			}
		},
	}
}

// alwaysOptions are respond's flags for saving the answer as a rule.
type alwaysOptions struct {
	pattern, scope string
	destructive    bool
}

// runRespond checks the target, makes the rule --always asks for, sends
// the answer and, once it is accepted, saves the rule.
func runRespond(ctx context.Context, o senderOptions, option, text string, a alwaysOptions, q *questionFlags, args []string, io stdio) int {
	session, requestID := args[0], ""
	if len(args) > 1 {
		requestID = args[1]
	}
	usage := func(msg string) int {
		fmt.Fprintf(io.err, "aep-kimi respond: %s\n", msg)
		return 2
	}
	if msg := q.usage(option, text, a); msg != "" {
		return usage(msg)
	}
	// Built first, so a command that cannot be sent fails before any lookup.
	var cmd *aep.Event
	var err error
	if !q.given() {
		if cmd, err = client.Respond(session, requestID, option, text); err != nil {
			return usage(err.Error() + " (a question: --choice or --other)")
		}
	}
	token, hc, ok := o.requireToken("respond", io)
	if !ok {
		return 2
	}
	f, req, code := respondTarget(ctx, o.url, token, hc, session, requestID, io)
	if req == nil {
		return code
	}
	if msg := q.formUsage(req, option, text, a); msg != "" {
		return usage(msg)
	}
	switch {
	case q.given():
		values, err := q.values(req.Questions())
		if err != nil {
			return usage(err.Error())
		}
		if cmd, err = client.RespondValues(req.Session, requestID, values); err != nil {
			return usage(err.Error())
		}
	case req.Session != session:
		// Named by its short id: the command goes to the whole.
		if cmd, err = client.Respond(req.Session, requestID, option, text); err != nil {
			return usage(err.Error())
		}
	}
	var rule *rules.Rule
	if a.pattern != "" {
		r, err := f.Always(req, option, a.pattern, a.scope)
		if err != nil {
			fmt.Fprintf(io.err, "aep-kimi respond: --always: %v\n", err)
			return 2
		}
		// Refused before the answer goes, so nothing is half done.
		if forms := rules.WildDestructive(r); len(forms) > 0 && !a.destructive {
			fmt.Fprintf(io.err, "aep-kimi respond: --always: %s\n", rules.DestructiveRefusal(r, forms))
			return 2
		}
		rule = &r
	}
	cmd.Subject, cmd.Cause = req.ID, req.ID
	if code := o.send(ctx, "respond", cmd, io); code != exitAccepted || rule == nil {
		return code
	}
	added, err := rules.Client{Base: o.url, Token: token, HTTP: hc}.Add(ctx, *rule, a.destructive)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi respond: answered, but the rule was not saved: %s\n", consumer.Line(err.Error()))
		return 1
	}
	fmt.Fprintf(io.out, "saved rule %s: %s\n", added.ID, rules.Describe(added))
	return exitAccepted
}

// targetExit maps why respond has no target to its exit code.
var targetExit = map[consumer.TargetProblem]int{
	consumer.UnknownSession: exitUnknownSession,
	consumer.UnknownRequest: exitUnknownRequest,
	consumer.NotPending:     exitNotPending,
	consumer.SeveralPending: exitSeveralPending,
}

// respondTarget checks a respond target against the relay's replay and
// returns the fold and the request to answer, or a nil request and the exit
// code (the reason printed, with the candidates when several wait).
func respondTarget(ctx context.Context, relayURL, token string, hc *http.Client, session, requestID string, io stdio) (*consumer.Fold, *consumer.Request, int) {
	f, err := consumer.LoadPending(ctx, relayURL, token, hc)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi respond: %v\n", err)
		return nil, nil, 1
	}
	now := time.Now()
	r, err := f.Target(session, requestID, now)
	var te *consumer.TargetError
	switch {
	case err == nil:
		return f, r, 0
	case !errors.As(err, &te):
		fmt.Fprintf(io.err, "aep-kimi respond: %v\n", err)
		return nil, nil, 1
	}
	consumer.WriteTargetError(io.err, "aep-kimi respond: ", f, te, now)
	return nil, nil, targetExit[te.Problem]
}

// cancelCommand cancels a session's run: aep-kimi cancel [--run RUN]
// SESSION.
func cancelCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "cancel",
		Summary: "cancel a session's run through the relay",
		Forms:   []string{"[--relay URL] [--run RUN] [--scope run|session] SESSION"},
		Env:     []string{"AEP_TOKEN"},
		Exit:    senderExitCodes,
		Args:    cli.Exactly(1),
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o senderOptions
			o.flags(fs, getenv)
			run := fs.String("run", "", "the run to cancel (default: the target's current run)")
			scope := fs.String("scope", client.ScopeRun, client.ScopeRun+" or "+client.ScopeSession)
			reason := fs.String("reason", "", "why (shown to watchers at capture redacted)")
			return func(ctx context.Context, args []string) int {
				cmd, err := client.Cancel(args[0], *run, *scope, *reason)
				return o.sendBuilt(ctx, "cancel", cmd, err, io)
			}
		},
	}
}

// instructCommand queues an instruction for a session's next prompt:
// aep-kimi instruct SESSION TEXT.
func instructCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "instruct",
		Summary: "queue an instruction for a session's next prompt",
		Forms:   []string{"[--relay URL] SESSION TEXT"},
		Env:     []string{"AEP_TOKEN"},
		Exit:    senderExitCodes,
		Args:    cli.Exactly(2),
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o senderOptions
			o.flags(fs, getenv)
			return func(ctx context.Context, args []string) int {
				cmd, err := client.Instruct(args[0], args[1])
				return o.sendBuilt(ctx, "instruct", cmd, err, io)
			}
		},
	}
}
