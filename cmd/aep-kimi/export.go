package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"github.com/aep-kimi/aep-kimi/export"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/tlsconf"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
)

// exportCommand converts event streams through an AEP-0005 bridge, one
// mode per bridge. Exit 0 when every input converted or was out of the
// bridge's scope, 1 when an input was bad or unreadable, 2 for usage errors.
func exportCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "export",
		Summary: "convert events to CloudEvents, OTLP or OCSF (AEP-0005 bridges)",
		About: "Without --relay: converts JSONL (stdin, or FILEs; - is stdin) to one record per\n" +
			"line on stdout (AEP-0005 bridges); skipped and bad inputs are counted on stderr.\n" +
			"With --relay: follows the relay and delivers every event matching --filter,\n" +
			"resuming after a restart from --state; progress on --metrics ADDR (/metrics).\n" +
			"The relay token comes from --token-file, else AEP_TOKEN, AEP_TOKEN_FILE or $AEP_HOME/token.",
		Env: []string{"AEP_TOKEN", "AEP_TOKEN_FILE", "AEP_HOME"},
		Exit: "Exit 0 when every input converted or was out of the bridge's scope, 1 when an input was bad\n" +
			"or unreadable (or the relay refused the subscription), 2 usage.",
		Modes: []cli.Command{
			exportMode(export.NameCE, []string{"[--inverse] [FILE...]", "--relay URL --sink URL"}, getenv, io),
			exportMode(export.NameOTLP, []string{"[--max-capture LEVEL] [--service-name NAME] [FILE...]",
				"--relay URL --endpoint http://HOST:4318 [--signal logs|traces|both] [--header K=V]..."}, getenv, io),
			exportMode(export.NameOCSF, []string{"[--max-capture LEVEL] [FILE...]", "--relay URL (--out FILE | --sink URL)"}, getenv, io),
		},
	}
}

// exportMode is one bridge of `aep-kimi export`.
func exportMode(mode string, forms []string, getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:  mode,
		Forms: forms,
		Args:  cli.AnyArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o export.Options
			o.BindFlags(fs, mode, tokenfile.AEPHome(getenv))
			o.CAFile = getenv(tlsconf.EnvCA) // --ca's default
			return func(ctx context.Context, files []string) int { return runExport(ctx, &o, files, getenv, io) }
		},
	}
}

// runExport converts files, or follows a relay with --relay.
func runExport(ctx context.Context, o *export.Options, files []string, getenv func(string) string, io stdio) int {
	conv, err := o.Converter()
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi export: %v\n", err)
		return 2
	}
	if o.Relay != "" {
		if len(files) > 0 {
			fmt.Fprintln(io.err, "aep-kimi export: FILE arguments and --relay exclude each other")
			return 2
		}
		return runExportLive(ctx, conv, o, getenv, io)
	}
	if o.LiveSet() {
		fmt.Fprintln(io.err, "aep-kimi export: --endpoint, --sink, --out and the other live flags need --relay")
		return 2
	}
	if !conv.ConvertReport(files, io.in, io.out, io.err, o.Mode) {
		return 1
	}
	return 0
}

// runExportLive runs one live exporter until ctx ends: exit 2 for bad
// configuration, 1 when the relay refuses the subscription.
func runExportLive(ctx context.Context, conv export.Converter, o *export.Options, getenv func(string) string, io stdio) int {
	token := func() (string, error) { return commandLineToken(getenv, o.TokenFile, o.Token, "export", io) }
	exp, reg, closeSink, err := o.Live(conv, token, slog.New(slog.NewTextHandler(io.err, nil)))
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi export %s: %v\n", o.Mode, err)
		return 2
	}
	defer closeSink()
	if err := export.Serve(ctx, exp, reg, o.Metrics); err != nil {
		fmt.Fprintf(io.err, "aep-kimi export %s: %v\n", o.Mode, err)
		return 1
	}
	return 0
}
