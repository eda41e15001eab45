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
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
	"github.com/aep-kimi/aep-kimi/mapping"
)

// mapCommand maps one hook payload (or, with --web, one kap-server frame)
// read on stdin and prints the resulting AEP envelopes, one JSON line each,
// with a placeholder identity (fresh ids, the current time, seq from 0).
func mapCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "map",
		Summary: "map one hook payload (or kap frame) on stdin to AEP events",
		Forms:   []string{"[--capture LEVEL] [--attention-capture LEVEL] [--web --mode companion|primary] < payload.json"},
		About: "Reads one hook payload (or, with --web, one kimi web frame) on stdin and prints the AEP events it maps to,\n" +
			"one JSON line each, with placeholder ids, the current time and seq from 0.",
		Examples: []string{`echo '{"hook_event_name":"Stop","session_id":"s1"}' | aep-kimi map`},
		Args:     cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o mapOptions
			fs.StringVar(&o.capture, "capture", "metadata", "capture ceiling: none, metadata, redacted or full")
			fs.StringVar(&o.attention, "attention-capture", "", "capture ceiling for attention.* (default redacted, or none when --capture none)")
			fs.BoolVar(&o.web, "web", false, "the input is one kimi web (kap-server) WebSocket frame, not a hook payload")
			fs.StringVar(&o.mode, "mode", "companion", "with --web: companion or primary")
			fs.BoolVar(&o.noPII, "no-pii", false, "do not redact emails and phone numbers at redacted")
			return func(_ context.Context, _ []string) int { return runMap(o, io) }
		},
	}
}

// mapOptions is `aep-kimi map`'s flag surface.
type mapOptions struct {
	capture, attention, mode string
	web, noPII               bool
}

// runMap maps stdin.
func runMap(o mapOptions, io stdio) int {
	posture, err := mapping.ParsePosture(o.capture, o.attention, aep.RedactOptions{Home: tokenfile.UserHome(), NoPII: o.noPII})
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi map: %v\n", err)
		return 2
	}
	webMode, err := mapping.ParseMode(o.mode)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi map: %v\n", err)
		return 2
	}
	in, err := readBounded(io.in, mapping.MaxPayloadBytes)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi map: %v\n", err)
		return 1
	}

	host, _ := os.Hostname()
	lines, err := mapping.Preview(in, o.web, webMode, posture, host, time.Now(), aep.NewID)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi map: %v\n", err)
		return 1
	}
	for _, b := range lines {
		fmt.Fprintf(io.out, "%s\n", b)
	}
	return 0
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
