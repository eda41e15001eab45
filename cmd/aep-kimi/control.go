package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/relay"
)

// Exit codes of the command senders.
const (
	exitAccepted = 0
	exitRejected = 3
	exitNoAck    = 4
)

// senderOptions are the flags every command sender shares.
type senderOptions struct {
	relayURL, tokenFile string
	window              time.Duration
}

func (o *senderOptions) flags(fs *flag.FlagSet) {
	fs.StringVar(&o.relayURL, "relay", envOr(os.Getenv, "AEP_RELAY", DefaultRelayURL), "relay base URL (env AEP_RELAY)")
	fs.StringVar(&o.tokenFile, "token-file", os.Getenv("AEP_TOKEN_FILE"), "file holding the relay token (env AEP_TOKEN_FILE; AEP_TOKEN also works)")
	fs.DurationVar(&o.window, "window", relay.DefaultAckWindow, "how long to wait for the target's ack")
}

// send delivers a command and maps its settlement to an exit code: 0
// accepted, 3 rejected (the reason on stderr), 4 no ack within the window.
func (o senderOptions) send(ctx context.Context, name string, cmd *aep.Event, io stdio) int {
	token, err := relayToken(os.Getenv, o.tokenFile)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", name, err)
		return 2
	}
	if token == "" {
		fmt.Fprintf(io.err, "aep-kimi %s: no relay token (set AEP_TOKEN or --token-file): control only flows on authenticated bindings\n", name)
		return 2
	}
	res, err := relay.SendCommand(ctx, o.relayURL, token, cmd, o.window)
	switch {
	case errors.Is(err, relay.ErrNoAck):
		fmt.Fprintf(io.err, "aep-kimi %s: no ack within %s (command %s)\n", name, o.window, cmd.ID)
		return exitNoAck
	case err != nil:
		fmt.Fprintf(io.err, "aep-kimi %s: %v\n", name, err)
		return 1
	case res.Accepted():
		fmt.Fprintf(io.out, "accepted %s (command %s)\n", cmd.Type, cmd.ID)
		return exitAccepted
	}
	who := "target"
	if res.Refused {
		who = "relay"
	}
	msg := fmt.Sprintf("rejected by the %s: %s", who, res.Reason)
	if res.Detail != "" {
		msg += ": " + res.Detail
	}
	fmt.Fprintf(io.err, "aep-kimi %s: %s\n", name, msg)
	return exitRejected
}

// runRespond answers an attention request: aep-kimi respond --option ID
// [--text T] SESSION REQUEST_ID.
func runRespond(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("aep-kimi respond", flag.ContinueOnError)
	var o senderOptions
	o.flags(fs)
	option := fs.String("option", "", "the option id to answer with (e.g. allow, allow_session, deny, cancel; approved/rejected on kimi web)")
	text := fs.String("text", "", "free text: a reason, or (alone) text naming an option")
	fs.Usage = func() {
		fmt.Fprintln(io.err, "usage: aep-kimi respond [--relay URL] --option ID [--text T] SESSION REQUEST_ID")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, io, 2); !ok {
		return code
	}
	if *option == "" && *text == "" {
		fmt.Fprintln(io.err, "aep-kimi respond: give --option, --text or both")
		return 2
	}
	answer := map[string]any{}
	if *option != "" {
		answer["option"] = *option
	}
	if *text != "" {
		answer["text"] = *text
	}
	cmd, err := relay.NewCommand("control.attention.respond", fs.Arg(0), map[string]any{"answer": answer})
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi respond: %v\n", err)
		return 2
	}
	cmd.Subject, cmd.Cause = fs.Arg(1), fs.Arg(1)
	if *text != "" {
		cmd.Capture = aep.CaptureRedacted.String()
	}
	return o.send(ctx, "respond", cmd, io)
}

// runCancel cancels a session's run: aep-kimi cancel [--run RUN] SESSION.
func runCancel(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("aep-kimi cancel", flag.ContinueOnError)
	var o senderOptions
	o.flags(fs)
	run := fs.String("run", "", "the run to cancel (default: the target's current run)")
	scope := fs.String("scope", "run", "run or session")
	reason := fs.String("reason", "", "why (shown to watchers at capture redacted)")
	fs.Usage = func() {
		fmt.Fprintln(io.err, "usage: aep-kimi cancel [--relay URL] [--run RUN] [--scope run|session] SESSION")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, io, 1); !ok {
		return code
	}
	if *scope != "run" && *scope != "session" {
		fmt.Fprintf(io.err, "aep-kimi cancel: --scope %q: want run or session\n", *scope)
		return 2
	}
	data := map[string]any{"scope": *scope}
	if *reason != "" {
		data["reason"] = *reason
	}
	cmd, err := relay.NewCommand("control.cancel", fs.Arg(0), data)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi cancel: %v\n", err)
		return 2
	}
	cmd.Run = *run
	if *reason != "" {
		cmd.Capture = aep.CaptureRedacted.String()
	}
	return o.send(ctx, "cancel", cmd, io)
}

// runInstruct queues an instruction for a session's next prompt:
// aep-kimi instruct SESSION TEXT.
func runInstruct(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("aep-kimi instruct", flag.ContinueOnError)
	var o senderOptions
	o.flags(fs)
	fs.Usage = func() {
		fmt.Fprintln(io.err, "usage: aep-kimi instruct [--relay URL] SESSION TEXT")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, io, 2); !ok {
		return code
	}
	text := fs.Arg(1)
	if strings.TrimSpace(text) == "" {
		fmt.Fprintln(io.err, "aep-kimi instruct: the instruction text is empty")
		return 2
	}
	cmd, err := relay.NewCommand("x.kimi-code.control.instruct", fs.Arg(0), map[string]any{"text": text})
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi instruct: %v\n", err)
		return 2
	}
	cmd.Capture = aep.CaptureRedacted.String()
	return o.send(ctx, "instruct", cmd, io)
}
