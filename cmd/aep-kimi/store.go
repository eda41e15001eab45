package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/relay"
)

// storeOptions selects and configures the relay's store.
type storeOptions struct {
	store, home, url, creds, ca, stream, natsListen string
	replicas                                        int
}

func (o *storeOptions) flags(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.store, "store", envOr(getenv, "AEP_STORE", relay.DefaultStore),
		"where the replay buffer lives: memory (lost on restart) or jetstream (durable; env AEP_STORE)")
	fs.StringVar(&o.home, "home", aepHome(getenv),
		"AEP home; the embedded jetstream store keeps its files in HOME/"+relay.StoreDirName+" (env AEP_HOME)")
	fs.StringVar(&o.url, "nats", getenv("AEP_NATS_URL"),
		"jetstream on an external NATS at this URL (comma-separated for a cluster) instead of the embedded one (env AEP_NATS_URL)")
	fs.StringVar(&o.creds, "nats-creds", getenv("AEP_NATS_CREDS"), "NATS credentials file for --nats (env AEP_NATS_CREDS)")
	fs.StringVar(&o.ca, "nats-ca", getenv("AEP_NATS_CA"), "PEM CA file that verifies the TLS certificate of --nats (env AEP_NATS_CA)")
	fs.StringVar(&o.stream, "nats-stream", envOr(getenv, "AEP_NATS_STREAM", relay.DefaultStream),
		"JetStream stream name; relays on one NATS with the same name share history (env AEP_NATS_STREAM)")
	fs.StringVar(&o.natsListen, "nats-listen", "",
		"let the embedded NATS listen for clients on this loopback address, e.g. for a second relay's --nats (default: no port at all)")
	fs.IntVar(&o.replicas, "nats-replicas", 1, "stream replicas when --nats is a JetStream cluster")
}

// open opens the selected store into cfg.Backend and returns its closer.
func (o *storeOptions) open(ctx context.Context, cfg *relay.Config) (func(), error) {
	switch strings.TrimSpace(o.store) {
	case relay.StoreMemory:
		if o.url != "" {
			return nil, fmt.Errorf("--nats needs --store %s", relay.StoreJetStream)
		}
		return func() {}, nil
	case relay.StoreJetStream:
		if o.natsListen != "" && !httpguard.LoopbackListen(o.natsListen) {
			// The embedded server has no accounts or TLS: off loopback, run
			// a NATS of your own and point relays at it with --nats.
			return nil, fmt.Errorf("--nats-listen %s: the embedded NATS listens on loopback only; use --nats for a NATS reachable off-host", o.natsListen)
		}
	default:
		return nil, fmt.Errorf("--store %s: want %s or %s", strconv.Quote(o.store), relay.StoreMemory, relay.StoreJetStream)
	}
	b, err := relay.OpenJetStream(ctx, relay.JetStreamConfig{
		Dir:         filepath.Join(o.home, relay.StoreDirName),
		Listen:      o.natsListen,
		URL:         o.url,
		CredsFile:   o.creds,
		CAFile:      o.ca,
		Stream:      o.stream,
		Replicas:    o.replicas,
		Buffer:      cfg.Buffer,
		MaxSessions: cfg.MaxSessions,
		BufferBytes: cfg.BufferBytes,
		MaxBody:     cfg.MaxBody,
		Logger:      cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	cfg.Backend = b
	return func() {
		if err := b.Close(); err != nil {
			cfg.Logger.Warn("closing the jetstream store", "err", err)
		}
	}, nil
}
