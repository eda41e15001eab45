package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/aep-kimi/aep-kimi/aep"
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
	var total, bad, unreadable int
	for _, name := range files {
		n, vs, err := validateFile(name, io.in)
		total += n
		if err != nil {
			fmt.Fprintf(io.out, "%s: %s\n", consumer.Line(name), consumer.Line(err.Error()))
			unreadable++
			continue
		}
		bad += len(vs)
		if !quiet {
			for _, v := range vs {
				fmt.Fprintf(io.out, "%s:%d: %s\n", consumer.Line(name), v.Line, consumer.Line(v.Error()))
			}
		}
	}
	fmt.Fprintf(io.out, "%d event(s) in %d file(s): %d violation(s)", total, len(files), bad)
	if unreadable > 0 {
		fmt.Fprintf(io.out, ", %d file(s) unreadable", unreadable)
	}
	fmt.Fprintln(io.out)
	if bad > 0 || unreadable > 0 {
		return 1
	}
	return 0
}

// validateFile reads one JSONL stream ("-": stdin) and returns its event
// count and violations; err is for a file that cannot be read at all.
func validateFile(name string, stdin io.Reader) (int, []aep.LineViolation, error) {
	if name == "-" {
		return aep.ValidateJSONL(stdin)
	}
	f, err := os.Open(name)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	return aep.ValidateJSONL(f)
}
