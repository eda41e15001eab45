package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/aep-kimi/aep-kimi/relay"
)

// runRelay is `aep-kimi relay`: the collector/relay daemon. Flags win over
// the reference relay's environment (AEP_PORT, AEP_TOKEN, AEP_BUFFER,
// AEP_MAX_SESSIONS, AEP_MAX_BODY, AEP_MAX_BATCH, AEP_MAX_FROM).
func runRelay(ctx context.Context, args []string, io stdio) int {
	fs := flag.NewFlagSet("aep-kimi relay", flag.ContinueOnError)
	fs.SetOutput(io.err)
	listen := fs.String("listen", "", "listen address (default 127.0.0.1:$AEP_PORT, else "+relay.DefaultListen+")")
	verbose := fs.Bool("v", false, "log every request (debug level)")
	fs.Usage = func() {
		fmt.Fprintln(io.err, "usage: aep-kimi relay [--listen ADDR] [-v]")
		fmt.Fprintln(io.err, "\nAn AEP 0.1 collector/relay: POST /events, GET /stream (SSE), /socket (WebSocket).")
		fmt.Fprintln(io.err, "\nEnvironment: AEP_PORT, AEP_TOKEN (enables auth and control routing), AEP_BUFFER,")
		fmt.Fprintln(io.err, "AEP_MAX_SESSIONS, AEP_MAX_BODY, AEP_MAX_BATCH, AEP_MAX_FROM.")
		fmt.Fprintln(io.err, "\nFlags:")
		fs.PrintDefaults()
	}
	if code, ok := parseFlags(fs, args, io, 0); !ok {
		return code
	}
	cfg, err := relayConfigFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi relay: %v\n", err)
		return 2
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.err, &slog.HandlerOptions{Level: level}))
	srv, err := relay.NewServer(cfg)
	if err != nil {
		fmt.Fprintf(io.err, "aep-kimi relay: %v\n", err)
		return 2
	}
	if err := srv.Run(ctx); err != nil {
		fmt.Fprintf(io.err, "aep-kimi relay: %v\n", err)
		return 1
	}
	return 0
}

// relayConfigFromEnv maps the reference relay's environment onto a Config.
func relayConfigFromEnv(getenv func(string) string) (relay.Config, error) {
	var cfg relay.Config
	if p := strings.TrimSpace(getenv("AEP_PORT")); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return cfg, fmt.Errorf("AEP_PORT=%q is not a port number", p)
		}
		cfg.Listen = net.JoinHostPort("127.0.0.1", p)
	}
	cfg.Token = getenv("AEP_TOKEN")
	ints := []struct {
		env string
		dst *int
	}{
		{"AEP_BUFFER", &cfg.Buffer},
		{"AEP_MAX_SESSIONS", &cfg.MaxSessions},
		{"AEP_MAX_BATCH", &cfg.MaxBatch},
		{"AEP_MAX_FROM", &cfg.MaxFrom},
	}
	for _, e := range ints {
		v := strings.TrimSpace(getenv(e.env))
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("%s=%q is not a positive integer", e.env, v)
		}
		*e.dst = n
	}
	if v := strings.TrimSpace(getenv("AEP_MAX_BODY")); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("AEP_MAX_BODY=%q is not a positive byte count", v)
		}
		cfg.MaxBody = n
	}
	return cfg, nil
}
