package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/logging"
	"github.com/aep-kimi/aep-kimi/rules"
	"github.com/aep-kimi/aep-kimi/station"
)

// relayCommand is `aep-kimi relay`: the collector/relay daemon. Flags win
// over the reference relay's environment (AEP_PORT, AEP_TOKEN, AEP_BUFFER,
// AEP_BUFFER_BYTES, AEP_MAX_SESSIONS, AEP_MAX_BODY, AEP_MAX_BATCH,
// AEP_MAX_FROM) and ours (AEP_TOKEN_FILE, AEP_PUBLIC, AEP_ALLOWED_HOSTS,
// AEP_MAX_CONNECTIONS, AEP_LOGIN_TTL).
func relayCommand(getenv func(string) string, io stdio) cli.Command {
	return cli.Command{
		Name:    "relay",
		Summary: "run the AEP collector/relay (POST /events, SSE /stream, WS /socket)",
		Forms: []string{"[--listen ADDR | --public] [--allowed-hosts H,...] [--buffer-bytes N] [--max-connections N]\n" +
			"[--tls-cert F --tls-key F | --acme-domain NAME [--acme-email E] [--acme-ca URL] | --behind-proxy]\n" +
			"[--store memory|jetstream [--home DIR | --nats URL [--nats-creds F] [--nats-ca F]] [--nats-stream NAME] [--store-sync interval|always]]\n" +
			"[--notify TARGET ...] [--public-url URL] [--notify-after D] [-v]"},
		About: "An AEP 0.1 collector/relay: POST /events, GET /stream (SSE), /socket (WebSocket).\n\n" +
			"AEP_TOKEN or AEP_TOKEN_FILE enables auth and control routing.\n\n" +
			"Rules in $AEP_HOME/" + rules.FileName + " answer permission requests for the whole fleet (see aep-kimi rules);\n" +
			"the file is reloaded when it changes.\n\n" +
			"Stores: memory keeps the replay buffer in this process and loses it on restart. jetstream keeps\n" +
			"every admitted event in a NATS JetStream stream: embedded (no port, files under $AEP_HOME/relay) or,\n" +
			"with --nats, on a NATS shared by several relays. A command sent to any relay on a shared stream\n" +
			"reaches the session's claimant through the relay it is connected to.\n\n" +
			"Off loopback (--public or a non-loopback --listen) the relay refuses to start without a token, and\n" +
			"without TLS: its own (--tls-cert and --tls-key, read again when the files change; or --acme-domain,\n" +
			"certificates from Let's Encrypt kept in $AEP_HOME/acme) or a TLS-terminating proxy's (--behind-proxy).\n\n" +
			"With a token the relay notifies people of waiting requests: Web Push to the devices subscribed from\n" +
			"the page, and each --notify target, with one-use answer links built on --public-url.",
		Env: []string{"AEP_PORT", "AEP_TOKEN", "AEP_TOKEN_FILE", "AEP_BUFFER", "AEP_BUFFER_BYTES", "AEP_MAX_SESSIONS",
			"AEP_MAX_BODY", "AEP_MAX_BATCH", "AEP_MAX_FROM", "AEP_MAX_CONNECTIONS", "AEP_LOGIN_TTL", "AEP_PUBLIC", "AEP_ALLOWED_HOSTS", "AEP_STORE", "AEP_HOME",
			"AEP_NATS_URL", "AEP_NATS_CREDS", "AEP_NATS_CA", "AEP_NATS_STREAM", "AEP_STORE_SYNC", "AEP_PUBLIC_URL", "AEP_NOTIFY_PUSH_ALLOW",
			"AEP_TLS_CERT", "AEP_TLS_KEY", "AEP_ACME_DOMAIN", "AEP_ACME_EMAIL", "AEP_ACME_CA", "AEP_BEHIND_PROXY", "GOMEMLIMIT"},
		Args: cli.NoArgs,
		Flags: func(fs *flag.FlagSet) cli.Run {
			var o station.RelayFlags
			o.BindFlags(fs, getenv)
			return func(ctx context.Context, _ []string) int { return runRelay(ctx, o, getenv, io) }
		},
	}
}

// runRelay runs the relay until ctx is done.
func runRelay(ctx context.Context, o station.RelayFlags, getenv func(string) string, io stdio) int {
	fail := func(code int, err error) int {
		fmt.Fprintf(io.err, "aep-kimi relay: %v\n", err)
		return code
	}
	cfg, err := o.Config(getenv)
	if err != nil {
		return fail(2, err)
	}
	cfg.Logger = logging.New(io.err, o.Verbose)
	srv, beside, closeStore, err := station.NewRelay(ctx, cfg, o.RelayOptions, getenv)
	if err != nil {
		return fail(exitFor(err), err)
	}
	defer closeStore()
	if len(beside) == 0 {
		if err := srv.Run(ctx); err != nil {
			return fail(1, err)
		}
		return 0
	}
	stn, err := station.Listen(srv, cfg.Listen)
	if err != nil {
		return fail(1, err)
	}
	for _, c := range beside {
		stn.Add(c, nil)
	}
	if err := stn.Run(ctx); err != nil {
		return fail(1, err)
	}
	return 0
}
