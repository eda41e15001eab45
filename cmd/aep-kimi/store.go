package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/relay"
)

// The values of --store-sync.
const (
	storeSyncInterval = "interval"
	storeSyncAlways   = "always"
)

// storeOptions selects and configures the relay's store. home is the AEP
// home, set by the command's own --home.
type storeOptions struct {
	store, home, url, creds, ca, stream, natsListen, sync string
	replicas                                              int
}

func (o *storeOptions) flags(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.store, "store", cli.EnvOr(getenv, "AEP_STORE", relay.DefaultStore),
		"where the replay buffer lives: memory (lost on restart) or jetstream (durable; env AEP_STORE)")
	fs.StringVar(&o.url, "nats", getenv("AEP_NATS_URL"),
		"jetstream on an external NATS at this URL (comma-separated for a cluster) instead of the embedded one (env AEP_NATS_URL)")
	fs.StringVar(&o.creds, "nats-creds", getenv("AEP_NATS_CREDS"),
		"NATS credentials file for --nats: a creds file or an nkey seed, e.g. another relay's $AEP_HOME/relay/"+relay.NATSCredsName+" to join its --nats-listen (env AEP_NATS_CREDS)")
	fs.StringVar(&o.ca, "nats-ca", getenv("AEP_NATS_CA"), "PEM CA file that verifies the TLS certificate of --nats (env AEP_NATS_CA)")
	fs.StringVar(&o.stream, "nats-stream", cli.EnvOr(getenv, "AEP_NATS_STREAM", relay.DefaultStream),
		"JetStream stream name; relays on one NATS with the same name share history (env AEP_NATS_STREAM)")
	fs.StringVar(&o.natsListen, "nats-listen", "",
		"let the embedded NATS listen for clients on this loopback address, e.g. for a second relay's --nats (default: no port at all); clients authenticate with $AEP_HOME/relay/"+relay.NATSCredsName+", generated on first use")
	fs.IntVar(&o.replicas, "nats-replicas", 1, "stream replicas when --nats is a JetStream cluster")
	fs.StringVar(&o.sync, "store-sync", cli.EnvOr(getenv, "AEP_STORE_SYNC", storeSyncInterval),
		"when the embedded store flushes to disk: interval (every "+relay.DefaultSyncInterval.String()+"; an admitted event survives a relay crash at once, a power loss after the flush) or always (every write; survives both, far slower) (env AEP_STORE_SYNC)")
}

// validate checks the store flags before anything starts.
func (o *storeOptions) validate() error {
	switch strings.TrimSpace(o.store) {
	case relay.StoreMemory:
		if o.url != "" {
			return fmt.Errorf("--nats needs --store %s", relay.StoreJetStream)
		}
	case relay.StoreJetStream:
		if o.natsListen != "" && !httpguard.LoopbackListen(o.natsListen) {
			// The embedded server has no TLS: off loopback, run a NATS of
			// your own and point relays at it with --nats.
			return fmt.Errorf("--nats-listen %s: the embedded NATS listens on loopback only; use --nats for a NATS reachable off-host", o.natsListen)
		}
	default:
		return fmt.Errorf("--store %s: want %s or %s", strconv.Quote(o.store), relay.StoreMemory, relay.StoreJetStream)
	}
	switch strings.TrimSpace(o.sync) {
	case storeSyncInterval:
	case storeSyncAlways:
		if o.url != "" {
			return fmt.Errorf("--store-sync %s is for the embedded store; an external NATS syncs as its own sync_interval says", storeSyncAlways)
		}
	default:
		return fmt.Errorf("--store-sync %s: want %s or %s", strconv.Quote(o.sync), storeSyncInterval, storeSyncAlways)
	}
	if o.replicas < 1 {
		return fmt.Errorf("--nats-replicas %d: want 1 or more", o.replicas)
	}
	return nil
}

// open opens the selected store into cfg.Backend and returns its closer.
// The options must have passed validate.
func (o *storeOptions) open(ctx context.Context, cfg *relay.Config) (func(), error) {
	if strings.TrimSpace(o.store) == relay.StoreMemory {
		return func() {}, nil
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
		SyncAlways:  strings.TrimSpace(o.sync) == storeSyncAlways,
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
