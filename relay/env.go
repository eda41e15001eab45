package relay

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/aep-kimi/aep-kimi/internal/cli"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
)

// The values of --store-sync.
const (
	StoreSyncInterval = "interval"
	StoreSyncAlways   = "always"
	// DefaultStoreSync is the embedded store's: every admitted event is on
	// the disk before the relay answers for it. The batches admitted while
	// one sync runs share the next, so it costs a fraction of a millisecond
	// per batch, not per event (BENCHMARKS.md), and an acknowledged event
	// survives a power loss, which NATS's interval does not promise.
	DefaultStoreSync = StoreSyncAlways
)

// ConfigFromEnv maps the reference relay's environment (AEP_PORT,
// AEP_TOKEN, AEP_BUFFER, AEP_MAX_SESSIONS, AEP_MAX_BATCH, AEP_MAX_FROM,
// AEP_MAX_CONNECTIONS, AEP_MAX_BODY, AEP_BUFFER_BYTES) onto a Config; a
// value that is not a positive number is an error naming its variable.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	var cfg Config
	if p := strings.TrimSpace(getenv("AEP_PORT")); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 || n > 65535 {
			return cfg, fmt.Errorf("AEP_PORT=%q is not a port number", p)
		}
		cfg.Listen = net.JoinHostPort("127.0.0.1", p)
	}
	cfg.Token = httpguard.TrimToken(getenv("AEP_TOKEN"))
	if err := cli.EnvPositiveInts(getenv, []cli.EnvInt{
		{Name: "AEP_BUFFER", Dst: &cfg.Buffer},
		{Name: "AEP_MAX_SESSIONS", Dst: &cfg.MaxSessions},
		{Name: "AEP_MAX_BATCH", Dst: &cfg.MaxBatch},
		{Name: "AEP_MAX_FROM", Dst: &cfg.MaxFrom},
		{Name: "AEP_MAX_CONNECTIONS", Dst: &cfg.MaxConnections},
	}); err != nil {
		return cfg, err
	}
	for _, e := range []struct {
		env string
		dst *int64
	}{{"AEP_MAX_BODY", &cfg.MaxBody}, {"AEP_BUFFER_BYTES", &cfg.BufferBytes}} {
		v := strings.TrimSpace(getenv(e.env))
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("%s=%q is not a positive byte count", e.env, v)
		}
		*e.dst = n
	}
	return cfg, nil
}

// LimitHeap sets the Go runtime's soft memory limit to the relay's byte
// budget plus HeapHeadroom, unless the operator set GOMEMLIMIT: the buffer
// is the bulk of the heap, and without a limit the collector lets garbage
// grow to about as much again before it runs.
func LimitHeap(getenv func(string) string, bufferBytes int64, log *slog.Logger) {
	if getenv("GOMEMLIMIT") != "" {
		return
	}
	if bufferBytes <= 0 {
		bufferBytes = DefaultBufferBytes
	}
	limit := bufferBytes + HeapHeadroom
	debug.SetMemoryLimit(limit)
	log.Debug("heap soft limit", "bytes", limit, "why", "buffer_bytes plus headroom; set GOMEMLIMIT to override")
}

// StoreOptions selects and configures the relay's store from flags and
// their environment (the relay and `up` bind the same ones). Home is the
// AEP home, set by the command's own --home.
type StoreOptions struct {
	Store, Home, URL, Creds, CA, Stream, NATSListen, Sync string
	Replicas                                              int
}

// BindFlags registers the store flags, their defaults read through getenv.
// o.Store, when set, is the default in place of DefaultStore.
func (o *StoreOptions) BindFlags(fs *flag.FlagSet, getenv func(string) string) {
	def := DefaultStore
	if o.Store != "" {
		def = o.Store
	}
	fs.StringVar(&o.Store, "store", cli.EnvOr(getenv, "AEP_STORE", def),
		"where the replay buffer lives: memory (lost on restart) or jetstream (durable; env AEP_STORE)")
	fs.StringVar(&o.URL, "nats", getenv("AEP_NATS_URL"),
		"jetstream on an external NATS at this URL (comma-separated for a cluster) instead of the embedded one (env AEP_NATS_URL)")
	fs.StringVar(&o.Creds, "nats-creds", getenv("AEP_NATS_CREDS"),
		"NATS credentials file for --nats: a creds file or an nkey seed, e.g. another relay's $AEP_HOME/relay/"+NATSCredsName+" to join its --nats-listen (env AEP_NATS_CREDS)")
	fs.StringVar(&o.CA, "nats-ca", getenv("AEP_NATS_CA"), "PEM CA file that verifies the TLS certificate of --nats (env AEP_NATS_CA)")
	fs.StringVar(&o.Stream, "nats-stream", cli.EnvOr(getenv, "AEP_NATS_STREAM", DefaultStream),
		"JetStream stream name; relays on one NATS with the same name share history (env AEP_NATS_STREAM)")
	fs.StringVar(&o.NATSListen, "nats-listen", "",
		"let the embedded NATS listen for clients on this loopback address, e.g. for a second relay's --nats (default: no port at all); clients authenticate with $AEP_HOME/relay/"+NATSCredsName+", generated on first use")
	fs.IntVar(&o.Replicas, "nats-replicas", 1, "stream replicas when --nats is a JetStream cluster")
	fs.StringVar(&o.Sync, "store-sync", cli.EnvOr(getenv, "AEP_STORE_SYNC", ""),
		"when the embedded store flushes to disk: always (the default: every batch is synced before the relay answers, the batches arriving meanwhile sharing one sync; an admitted event survives a power loss) "+
			"or interval (every "+DefaultSyncInterval.String()+"; an admitted event survives a relay crash at once, a power loss after the flush) (env AEP_STORE_SYNC)")
}

// Validate checks the store options before anything starts.
func (o *StoreOptions) Validate() error {
	switch strings.TrimSpace(o.Store) {
	case StoreMemory:
		if o.URL != "" {
			return fmt.Errorf("--nats needs --store %s", StoreJetStream)
		}
	case StoreJetStream:
		if o.NATSListen != "" && !httpguard.LoopbackListen(o.NATSListen) {
			// The embedded server has no TLS: off loopback, run a NATS of
			// your own and point relays at it with --nats.
			return fmt.Errorf("--nats-listen %s: the embedded NATS listens on loopback only; use --nats for a NATS reachable off-host", o.NATSListen)
		}
	default:
		return fmt.Errorf("--store %s: want %s or %s", strconv.Quote(o.Store), StoreMemory, StoreJetStream)
	}
	switch strings.TrimSpace(o.Sync) {
	case "", StoreSyncInterval:
	case StoreSyncAlways:
		if o.URL != "" {
			return fmt.Errorf("--store-sync %s is for the embedded store; an external NATS syncs as its own sync_interval says", StoreSyncAlways)
		}
	default:
		return fmt.Errorf("--store-sync %s: want %s or %s", strconv.Quote(o.Sync), StoreSyncInterval, StoreSyncAlways)
	}
	if o.Replicas < 1 {
		return fmt.Errorf("--nats-replicas %d: want 1 or more", o.Replicas)
	}
	return nil
}

// syncAlways says whether the embedded store syncs every batch: asked for,
// or by default (DefaultStoreSync). An external NATS syncs as it is told.
func (o *StoreOptions) syncAlways() bool {
	switch strings.TrimSpace(o.Sync) {
	case "":
		return o.URL == "" && DefaultStoreSync == StoreSyncAlways
	case StoreSyncAlways:
		return true
	}
	return false
}

// Open opens the selected store into cfg.Backend and returns its closer.
// The options must have passed Validate.
func (o *StoreOptions) Open(ctx context.Context, cfg *Config) (func(), error) {
	if strings.TrimSpace(o.Store) == StoreMemory {
		return func() {}, nil
	}
	b, err := OpenJetStream(ctx, JetStreamConfig{
		Dir:         filepath.Join(o.Home, StoreDirName),
		Listen:      o.NATSListen,
		URL:         o.URL,
		CredsFile:   o.Creds,
		CAFile:      o.CA,
		Stream:      o.Stream,
		Replicas:    o.Replicas,
		Buffer:      cfg.Buffer,
		MaxSessions: cfg.MaxSessions,
		BufferBytes: cfg.BufferBytes,
		MaxBody:     cfg.MaxBody,
		SyncAlways:  o.syncAlways(),
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
