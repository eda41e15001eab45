package relay

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/internal/credreg"
	"github.com/aep-kimi/aep-kimi/internal/defaults"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/relay/wire"
	"github.com/aep-kimi/aep-kimi/rules"
)

// Defaults for Config. The environment names in brackets are the reference
// relay's knobs, which cmd/aep-kimi maps onto these fields.
const (
	// DefaultListen is loopback: a relay reachable off-host needs TLS in front
	// and a token (AEP-0003 §8.1), which is a deliberate operator decision.
	DefaultListen = "127.0.0.1:8787"
	// DefaultBuffer is the per-session replay depth in events [AEP_BUFFER].
	DefaultBuffer = 10000
	// DefaultBufferBytes caps the wire bytes held across all sessions; past
	// it the oldest events are trimmed [AEP_BUFFER_BYTES]. The per-session
	// and session caps alone allow 500 x 10,000 events of up to 16 MiB.
	DefaultBufferBytes = 256 << 20
	// HeapHeadroom is what the relay needs beside its buffer (bodies being
	// read, consumer queues, the runtime). cmd/aep-kimi sets the Go soft
	// memory limit to BufferBytes plus this, unless GOMEMLIMIT is set, so
	// uncollected garbage does not double the buffer's footprint.
	HeapHeadroom = 128 << 20
	// DefaultMaxSessions caps the sessions held; the least recently written
	// is evicted past it [AEP_MAX_SESSIONS].
	DefaultMaxSessions = 500
	// DefaultMaxBody caps one POST body and one WebSocket message [AEP_MAX_BODY].
	DefaultMaxBody = 16 << 20
	// DefaultBodyTimeout bounds the time to receive one POST body: 16 MiB
	// needs about 0.8 MiB/s, and a client trickling a body is cut off.
	DefaultBodyTimeout = 20 * time.Second
	// DefaultMaxBatch caps the events in one NDJSON POST [AEP_MAX_BATCH].
	DefaultMaxBatch = 10000
	// DefaultQueueSize is each consumer's live queue, in events. A consumer
	// this far behind loses debug/info events first and is disconnected (with
	// its positions) rather than lose a notice-or-above event (AEP-0003 §8.4).
	DefaultQueueSize = 4096
	// DefaultMaxSubscriptions caps concurrent subscriptions on one socket.
	DefaultMaxSubscriptions = 64
	// DefaultPingInterval paces SSE heartbeat comments (AEP-0003 §3.3.4 asks
	// for one at least every 30 s) and WebSocket ping frames.
	DefaultPingInterval = 15 * time.Second
	// DefaultLivenessTimeout closes a socket that has sent nothing, not even a
	// pong, for this long (AEP-0003 §3.5.5 recommends 90 s).
	DefaultLivenessTimeout = 90 * time.Second
	// DefaultWriteTimeout bounds one write to a consumer; a consumer that
	// cannot take a batch in this time is cut off.
	DefaultWriteTimeout = 10 * time.Second
	// DefaultDrainTimeout bounds the shutdown drain; past it Run gives up
	// with ErrDrainTimeout.
	DefaultDrainTimeout = 5 * time.Second
	// DefaultHelloTimeout bounds the wait for a socket's first frame.
	DefaultHelloTimeout = 10 * time.Second
	// DefaultMaxConnections caps the streams and sockets open at once,
	// emitters' included; past it a new one is refused with 503
	// [AEP_MAX_CONNECTIONS].
	DefaultMaxConnections = 256
	// DefaultTokenPoll paces re-reading Config.TokenSource and the page's
	// login key: a replaced token or key ends what the old one admitted
	// within about this long.
	DefaultTokenPoll = 500 * time.Millisecond
	// connRetryAfter is the Retry-After a refused connection is given.
	connRetryAfter = 5
	// wsIngestBytes bounds the events one socket has read but the store
	// has not yet taken; wsMaxIngestBatch caps one hand-over.
	wsIngestBytes    = 4 << 20
	wsMaxIngestBatch = 512
)

// Store selection and the JetStream store's defaults. cmd/aep-kimi maps the
// environment names in brackets onto JetStreamConfig.
const (
	// StoreMemory keeps the replay buffer in the relay's memory: fastest,
	// gone on restart.
	StoreMemory = "memory"
	// StoreJetStream keeps it in a NATS JetStream stream, embedded (file
	// storage under the AEP home) or on an external NATS [AEP_STORE].
	StoreJetStream = "jetstream"
	// DefaultStore is what `aep-kimi relay` runs without --store [AEP_STORE].
	DefaultStore = StoreMemory
	// DefaultStream names the JetStream stream; relays sharing one NATS and
	// one stream name share history and dedupe [AEP_NATS_STREAM].
	DefaultStream = "AEP"
	// StoreDirName is the embedded store's directory under the AEP home.
	StoreDirName = wire.StoreDirName
	// NATSCredsName is the file in the embedded store's directory holding
	// the NATS user a second relay connects as when the embedded server
	// listens (--nats-listen); generated on the first such start, 0600.
	NATSCredsName = wire.NATSCredsName
	// DefaultDuplicateWindow is how long the stream remembers a Nats-Msg-Id:
	// long enough for a batch whose acknowledgement timed out to be resent
	// (DefaultPublishTimeout and the sender's backoff), and for two relays
	// handed one event at once. Admission dedupe itself is the index's,
	// while the session holds the event. The stream keeps about 90 bytes of
	// memory per event inside the window, so at 50,000 events/s this is
	// about 135 MB; NATS's own default of two minutes would be 540 MB.
	DefaultDuplicateWindow = 30 * time.Second
	// DefaultSyncInterval is how often the embedded server flushes written
	// events to the disk (NATS's own default is two minutes): what a power
	// loss can take of admitted events [AEP_STORE_SYNC=always flushes each
	// write instead].
	DefaultSyncInterval = 10 * time.Second
	// DefaultPublishTimeout bounds the wait for the stream to acknowledge a
	// batch; past it the batch is refused (503) and the sender retries.
	DefaultPublishTimeout = 10 * time.Second
	// DefaultRouteTimeout bounds the wait for another relay's answer to a
	// command routed to its claimant; past it the sender gets no-route.
	DefaultRouteTimeout = 5 * time.Second
	// DefaultStartTimeout bounds starting the embedded server, connecting
	// to an external one and setting up the stream.
	DefaultStartTimeout = 30 * time.Second
	// followHeartbeat paces the stream follower's idle heartbeats: a
	// follower whose NATS node went away notices within about two of them
	// and resumes on another node.
	followHeartbeat = time.Second
	// MaxJetStreamEvent is the largest event the jetstream store carries:
	// NATS refuses payloads above 64 MiB, and a pull of the stream must fit
	// a client's 64 MiB of pending bytes with room to spare. A relay whose
	// AEP_MAX_BODY is larger refuses to start on this store.
	MaxJetStreamEvent = 32 << 20
	// headroom is what a stream message carries beside the event: its
	// subject and headers.
	headroom = 64 << 10
	// followBatch and followBytes bound what the follower (and the
	// rebuild) asks the stream for at once; one largest message always fits.
	followBatch = 4096
	followBytes = MaxJetStreamEvent + headroom
	// streamBytesFactor sizes a shared stream's byte limit from the buffer's
	// byte budget: each stored message also carries a subject and headers,
	// about 270 bytes, which outweigh a small event.
	streamBytesFactor = 4
)

// Config configures a Server. The zero value is usable: every zero field
// takes its Default constant, and an empty Token makes the relay watch-only.
type Config struct {
	// Listen is the TCP address Run listens on.
	Listen string
	// Token, when set, is the bearer token every request but /healthz must
	// carry (Authorization header, or access_token query parameter for
	// browsers). Without it the relay is watch-only: it refuses every control
	// command (AEP-0004 §4.1). Surrounding whitespace is not part of it
	// (httpguard.TrimToken), so a blank token is no token.
	Token string
	// AllowedHosts are the names besides loopback a request's Host may carry
	// (httpguard.Hosts): a defence against DNS rebinding.
	AllowedHosts []string
	// Buffer is the per-session replay depth in events.
	Buffer int
	// BufferBytes caps the wire bytes held across all sessions (in-memory
	// backend only).
	BufferBytes int64
	// MaxSessions caps the sessions held.
	MaxSessions int
	// MaxBody caps one request body or socket message, in bytes.
	MaxBody int64
	// BodyTimeout bounds the time to receive one POST body.
	BodyTimeout time.Duration
	// MaxBatch caps the events in one NDJSON batch.
	MaxBatch int
	// MaxFrom caps the positions in one resume request; zero means
	// MaxSessions.
	MaxFrom int
	// QueueSize is each consumer's live queue length.
	QueueSize int
	// MaxSubscriptions caps subscriptions per socket.
	MaxSubscriptions int
	// PingInterval paces heartbeats on both consuming bindings.
	PingInterval time.Duration
	// LivenessTimeout closes a silent socket.
	LivenessTimeout time.Duration
	// WriteTimeout bounds one write to a consumer.
	WriteTimeout time.Duration
	// DrainTimeout bounds the shutdown drain.
	DrainTimeout time.Duration
	// HelloTimeout bounds the wait for a socket's hello.
	HelloTimeout time.Duration
	// MaxConnections caps the streams and sockets open at once.
	MaxConnections int
	// TokenSource, when set, is read every TokenPoll while the relay
	// serves (a token file): a new token replaces Token, and every stream
	// and socket the old one admitted ends at once, the page's logins and
	// theirs with it. An empty or failing read keeps the token in force
	// (logged): a relay never turns watch-only while it runs.
	TokenSource func() (string, error)
	// TokenPoll paces TokenSource and the page's Rekey.
	TokenPoll time.Duration
	// Credentials ties every stream and socket to the credential that
	// admitted it (the token, a page login); nil means the page's
	// registry, or a new one without a page.
	Credentials *credreg.Registry
	// AllowedOrigins are extra host patterns (path.Match syntax) whose
	// browsers may open the socket; same-origin and non-browser clients are
	// always allowed.
	AllowedOrigins []string
	// Instance names this relay in its hello identity; empty means
	// "aep-kimi-relay".
	Instance string
	// Logger receives operational logs; nil discards them. Tokens and query
	// strings are never logged.
	Logger *slog.Logger
	// Backend stores and fans out events; nil means a fresh in-memory
	// backend sized by Buffer and MaxSessions.
	Backend Backend
	// Page, when set, is served at / and /app/* (outside the token check:
	// it carries its own login), and a browser it admits reaches /stream
	// and /socket without the bearer token.
	Page Page
	// Rules, when set, are the fleet's rules: the relay answers the
	// permission requests they decide (on an authenticated relay), serves
	// them at /rules, and reloads their file while it runs (Run, Serve).
	Rules *rules.Book
	// Notify, when set, reaches people when requests wait (package
	// notify): its answer links are served under AnswerPath outside the
	// token check (the one-use token each carries is the credential), its
	// API under NotifyPath behind it, a logged-in page included.
	Notify Notifier
	// People, when set, are the people whose own tokens the relay admits
	// besides its own (the owner's), each with a role and a capture
	// ceiling; their file is re-read every TokenPoll, and a revoked or
	// changed token ends what it opened.
	People *access.Roster
	// TLS, when set, makes Run and Serve serve TLS with it on their
	// listener: HTTP/1.1 only (a socket is an HTTP/1.1 upgrade).
	TLS *tls.Config
	// BehindProxy says a TLS-terminating proxy fronts the relay: only then
	// are its X-Forwarded-Proto and X-Forwarded-For believed
	// (httpguard.Forwarded).
	BehindProxy bool
}

// Where a Notifier is mounted.
const (
	AnswerPath = "/answer/"
	NotifyPath = "/notify/"
)

// Notifier is what the relay serves for notifications.
type Notifier interface {
	// AnswerLinks serves AnswerPath+"*": a GET confirms, a POST answers.
	AnswerLinks() http.Handler
	// API serves NotifyPath+"*" to authenticated callers.
	API() http.Handler
	// Collectors are its metrics, served on the relay's /metrics.
	Collectors() []prometheus.Collector
}

// Page is a web page the relay serves, with its own browser login.
type Page interface {
	http.Handler
	// Admit checks whether r comes from a browser the page logged in, from
	// the relay's own origin, and returns the login's credential. It runs
	// under the registry's lock (tx). With socket set the login may be
	// admitted pending its hello: bind is then set, and the socket is
	// refused unless bind accepts the secret the hello carries.
	// The principal is the one of the token the login was made with.
	Admit(tx *credreg.Tx, r *http.Request, socket bool) (cred credreg.Credential, who access.Principal, bind func(secret string) bool, ok bool)
	// Credentials is the registry the page's logins are held in; the relay
	// shares it.
	Credentials() *credreg.Registry
	// Rekey takes the relay's token (a new one ends every login) and
	// re-reads the page's own key, ending every login when it changed.
	Rekey(token string) error
}

// withDefaults returns c with every zero field set to its default, or an
// error for a negative or inconsistent value.
func (c Config) withDefaults() (Config, error) {
	const component = "relay config"
	defaults.Set(&c.Listen, DefaultListen)
	err := errors.Join(
		defaults.Positive(component, "Buffer", &c.Buffer, DefaultBuffer),
		defaults.Positive(component, "MaxSessions", &c.MaxSessions, DefaultMaxSessions),
		defaults.Positive(component, "MaxBatch", &c.MaxBatch, DefaultMaxBatch),
		defaults.Positive(component, "QueueSize", &c.QueueSize, DefaultQueueSize),
		defaults.Positive(component, "MaxSubscriptions", &c.MaxSubscriptions, DefaultMaxSubscriptions),
		defaults.Positive(component, "MaxBody", &c.MaxBody, DefaultMaxBody),
		defaults.Positive(component, "MaxFrom", &c.MaxFrom, c.MaxSessions),
		defaults.Positive(component, "PingInterval", &c.PingInterval, DefaultPingInterval),
		defaults.Positive(component, "LivenessTimeout", &c.LivenessTimeout, DefaultLivenessTimeout),
		defaults.Positive(component, "WriteTimeout", &c.WriteTimeout, DefaultWriteTimeout),
		defaults.Positive(component, "DrainTimeout", &c.DrainTimeout, DefaultDrainTimeout),
		defaults.Positive(component, "HelloTimeout", &c.HelloTimeout, DefaultHelloTimeout),
		defaults.Positive(component, "BodyTimeout", &c.BodyTimeout, DefaultBodyTimeout),
		defaults.Positive(component, "BufferBytes", &c.BufferBytes, DefaultBufferBytes),
		defaults.Positive(component, "MaxConnections", &c.MaxConnections, DefaultMaxConnections),
		defaults.Positive(component, "TokenPoll", &c.TokenPoll, DefaultTokenPoll),
	)
	if err != nil {
		return c, err
	}
	if c.QueueSize < 4 {
		return c, errors.New("relay config: QueueSize must be at least 4")
	}
	if c.BufferBytes < c.MaxBody {
		return c, fmt.Errorf("relay config: BufferBytes (%d) must hold at least one largest event (MaxBody, %d)", c.BufferBytes, c.MaxBody)
	}
	c.Token = httpguard.TrimToken(c.Token)
	switch {
	case c.Page != nil && c.Credentials == nil:
		c.Credentials = c.Page.Credentials()
	case c.Page != nil && c.Credentials != c.Page.Credentials():
		return c, errors.New("relay config: the page and the relay must share one credential registry (leave Credentials nil)")
	case c.Credentials == nil:
		c.Credentials = &credreg.Registry{}
	}
	defaults.Set(&c.Instance, "aep-kimi-relay")
	defaults.Set(&c.Logger, slog.New(slog.DiscardHandler))
	return c, nil
}
