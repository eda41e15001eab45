package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/aep-kimi/aep-kimi/export"
	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/logging"
	"github.com/aep-kimi/aep-kimi/relay/consumer"
	"github.com/aep-kimi/aep-kimi/station"
)

// upOptions is `aep-kimi up`'s surface: the components' own flags and
// the OTLP exporter beside them.
type upOptions struct {
	station.UpOptions
	otlp export.UpOTLP
}

// upCommand is `aep-kimi up`: the relay, the adapter and (unless
// --web=false) the kimi web bridge, in one process sharing one token.
func upCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "up",
		Summary: "run the relay, the hook adapter and the kimi web bridge together",
		Forms: []string{"[--home DIR] [--relay-listen ADDR] [--adapter-listen ADDR] [--web=false] [--public]\n" +
			"[--tls-cert F --tls-key F | --acme-domain NAME ... | --behind-proxy]\n" +
			"[--store memory|jetstream ...] [--otlp URL] [--control [--on-timeout allow|deny]]\n" +
			"[--notify TARGET ...] [--public-url URL] [--notify-after D]"},
		About: "Runs the relay, the hook adapter and the kimi web bridge (which attaches each kimi web server as it starts),\n" +
			"sharing one relay token kept in $AEP_HOME/token. Every component reads its usual environment\n" +
			"(see aep-kimi relay -h, aep-kimi adapter -h, aep-kimi bridge-web -h). With the relay serving TLS, the\n" +
			"adapter, the bridge and the exporter reach it over TLS, trusting exactly the certificate it serves.",
		Env:  []string{"AEP_TOKEN", "AEP_TOKEN_FILE", "AEP_PORT", "AEP_KIMI_ADDR", "AEP_KIMI_CONTROL", "AEP_KIMI_ON_TIMEOUT", "AEP_INSTRUCT", "AEP_LOG_SYNC", "AEP_PUBLIC_URL"},
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o upOptions
			o.BindFlags(fs, getenv)
			o.otlp.BindFlags(fs)
			return func(ctx context.Context, _ []string) int {
				if err := upRun(ctx, o, getenv, io); err != nil {
					fmt.Fprintf(io.err, "aep-kimi up: %v\n", err)
					return exitFor(err)
				}
				return 0
			}
		},
	}
}

// upRun runs up until ctx ends.
func upRun(ctx context.Context, o upOptions, getenv func(string) string, io stdio) error {
	// The log waits for the banner, so the banner is the first thing up
	// prints.
	held := logging.NewHeld(io.err)
	defer held.Release()
	o.BannerWritten = held.Release
	log := logging.New(held, o.Verbose)
	exp, err := o.otlp.Exporter(o.Home, log.With("component", "otlp-export"))
	if err != nil {
		return station.Usage(err)
	}
	return station.Up(ctx, o.UpOptions, exp, getenv, io.out, consumer.IsTerminal(io.out), log)
}
