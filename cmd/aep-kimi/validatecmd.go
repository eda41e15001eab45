package main

import (
	"context"
	"flag"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
)

// validateCommand checks JSONL streams: every line's envelope and payload,
// and the stream rules across the lines of each file. It prints one line
// per violation and a summary, and exits 1 on any violation.
func validateCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "validate",
		Summary: "check JSONL event streams against AEP 0.1",
		Forms:   []string{"[-q] FILE... (- for stdin)"},
		About: "Checks every line's envelope and payload, and the stream rules across the lines of each file;\n" +
			"prints one line per violation and a summary.",
		Exit:     "Exit 0 when every event is valid, 1 on any violation or unreadable file, 2 usage.",
		Examples: []string{"aep-kimi validate ~/.aep/logs/kimi-code/*.jsonl"},
		Args:     cli.Args{Min: 1, Max: -1},
		Flags: func(fs *flag.FlagSet) cli.Run {
			quiet := fs.Bool("q", false, "print only the summary")
			return func(_ context.Context, files []string) int { return runValidate(files, *quiet, io) }
		},
	}
}

// runValidate checks each file.
func runValidate(files []string, quiet bool, io stdio) int {
	if !consumer.WriteValidation(io.out, files, io.in, quiet) {
		return 1
	}
	return 0
}
