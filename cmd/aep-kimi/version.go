package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/aep-kimi/aep-kimi/internal/buildinfo"
	"github.com/aep-kimi/aep-kimi/internal/cli"
)

// versionCommand prints which build this is (aep-kimi --version prints
// the same facts on one line).
func versionCommand(_ func(string) string, std stdio) cli.Command {
	return cli.Command{
		Name:    "version",
		Summary: "print the version, commit, build date, Go version and platform",
		Forms:   []string{"[--json]"},
		About: "Prints one field a line; --json prints them as one JSON object. `aep-kimi --version` prints\n" +
			"them on one line, as kimi-hook --version and aep-setup --version do.",
		Examples: []string{"aep-kimi version", "aep-kimi --version"},
		Args:     cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			asJSON := fs.Bool("json", false, "print one JSON object")
			return func(context.Context, []string) int { return printVersion(std, buildinfo.Get(), *asJSON) }
		},
	}
}

func printVersion(std stdio, in buildinfo.Info, asJSON bool) int {
	var err error
	if asJSON {
		err = json.NewEncoder(std.out).Encode(in)
	} else {
		_, err = io.WriteString(std.out, in.Text())
	}
	if err != nil {
		fmt.Fprintf(std.err, "aep-kimi version: %v\n", err)
		return 1
	}
	return 0
}

// versionLine is what aep-kimi --version prints.
func versionLine() string { return buildinfo.Get().Line(prog) }
