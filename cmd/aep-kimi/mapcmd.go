package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// runMap maps one hook payload (or, with --web, one kap-server frame) read
// on stdin and prints the resulting AEP envelopes, one JSON line each, with a
// placeholder identity (fresh ids, the current time, seq from 0).
func runMap(_ context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("map", flag.ContinueOnError)
	fs.SetOutput(io.err)
	capture := fs.String("capture", "metadata", "capture ceiling: none, metadata, redacted or full")
	attention := fs.String("attention-capture", "", "capture ceiling for attention.* (default redacted, or none when --capture none)")
	web := fs.Bool("web", false, "the input is one kimi web (kap-server) WebSocket frame, not a hook payload")
	mode := fs.String("mode", "companion", "with --web: companion or primary")
	noPII := fs.Bool("no-pii", false, "do not redact emails and phone numbers at redacted")
	fs.Usage = func() {
		fmt.Fprintln(io.err, "usage: aep-kimi map [--capture LEVEL] [--attention-capture LEVEL] [--web --mode companion|primary] < payload.json")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(io.err, "aep-kimi map: unexpected argument %q (the payload is read from stdin)\n", fs.Arg(0))
		return 2
	}
	posture, err := postureFrom(*capture, *attention, aep.RedactOptions{Home: homeDir(), NoPII: *noPII})
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi map: %v\n", err)
		return 2
	}
	webMode, err := mapping.ParseMode(*mode)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi map: %v\n", err)
		return 2
	}
	in, err := readBounded(io.in, mapping.MaxPayloadBytes)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi map: %v\n", err)
		return 1
	}

	var events []mapping.Event
	session := ""
	if *web {
		r, err := mapping.Web(in, webMode, posture)
		if err != nil {
			fmt.Fprintf(io.err, "aep-kimi map: %v\n", err)
			return 1
		}
		events, session = r.Events, r.Facts.SessionID
	} else {
		r, err := mapping.Hook(in, posture)
		if err != nil {
			fmt.Fprintf(io.err, "aep-kimi map: %v\n", err)
			return 1
		}
		events, session = r.Events, r.Facts.Session
	}
	if session == "" {
		session = "unknown"
	}
	host, _ := os.Hostname()
	for i, m := range events {
		e := &aep.Event{
			ID:      aep.NewID(),
			Time:    aep.FormatTime(time.Now()),
			Source:  aep.SourceURI(host, mapping.Agent, session),
			Agent:   mapping.Agent,
			Session: session,
			Seq:     aep.Int64(int64(i)),
		}
		if err := m.Envelope(e); err != nil {
			fmt.Fprintf(io.err, "aep-kimi map: %v\n", err)
			return 1
		}
		b, err := e.MarshalJSON()
		if err != nil {
			fmt.Fprintf(io.err, "aep-kimi map: %v\n", err)
			return 1
		}
		fmt.Fprintf(io.out, "%s\n", b)
	}
	return 0
}

// postureFrom builds a mapping posture from flag or environment strings.
// An unset attention level is redacted, except under an explicit none.
func postureFrom(capture, attention string, ro aep.RedactOptions) (mapping.Posture, error) {
	p := mapping.DefaultPosture()
	c, err := aep.ParseCapture(capture)
	if err != nil {
		return p, err
	}
	p.Capture = c
	switch {
	case attention != "":
		a, err := aep.ParseCapture(attention)
		if err != nil {
			return p, fmt.Errorf("attention capture: %w", err)
		}
		p.AttentionCapture = a
	case c == aep.CaptureNone:
		p.AttentionCapture = aep.CaptureNone
	}
	p.Redactor = aep.NewRedactor(ro)
	return p, nil
}

var errTooLarge = errors.New("input too large")

// readBounded reads all of r, failing clearly on empty or oversize input.
func readBounded(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("reading stdin: %w", err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", errTooLarge, limit)
	}
	if len(b) == 0 {
		return nil, errors.New("empty input: pipe one JSON payload on stdin")
	}
	return b, nil
}

func homeDir() string {
	h, _ := os.UserHomeDir()
	return h
}
