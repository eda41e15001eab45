package relay

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"
	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/aep-kimi/aep-kimi/aep"
	"github.com/aep-kimi/aep-kimi/internal/defaults"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/syncmode"
)

// storeLockName is the lock file in the embedded store's directory.
const storeLockName = "relay.lock"

// originHeader names the relay process that published a message, so its own
// follower skips what it already admitted. It only tells apart processes
// that share one identity (one credentials file): who sent a message is the
// identity in its subject, which the server checked (see natsauth.go).
const originHeader = "Aep-Relay"

// indexHeader carries what the index needs of a stored event (see
// indexValue), so a rebuild need not parse a million envelopes.
const indexHeader = "Aep-Index"

// JetStreamConfig configures a JetStreamBackend. Without URL it runs an
// embedded nats-server with file storage in Dir; with URL it uses that NATS
// and Dir is unused.
type JetStreamConfig struct {
	// Dir holds the embedded server's file storage.
	Dir string
	// Listen, when set, is a client address the embedded server listens on
	// (for a second relay or the nats CLI); empty means no port at all.
	// Clients must authenticate: as the user in Dir's NATSCredsName,
	// generated on the first start that listens.
	Listen string
	// URL is an external NATS server (or comma-separated cluster URLs).
	// Without credentials (CredsFile, or a user in the URL) the store warns:
	// whoever reaches that NATS can read and forge events.
	URL string
	// CredsFile is a NATS credentials file for URL: a creds file (user JWT
	// and seed) or an nkey seed file, such as the NATSCredsName file an
	// embedded store that listens generates. It may be a link; it must not
	// be readable by others.
	CredsFile string
	// CAFile is a PEM CA bundle that verifies URL's TLS certificate.
	CAFile string
	// Stream names the stream; empty means DefaultStream.
	Stream string
	// Replicas is the stream's replication factor on a cluster; zero is 1.
	Replicas int
	// Buffer, MaxSessions and BufferBytes bound the store exactly as they
	// bound the memory backend (zero takes the Default constants).
	Buffer, MaxSessions int
	BufferBytes         int64
	// MaxBody is the largest event the relay accepts; the embedded server's
	// payload limit is set to carry it (zero takes DefaultMaxBody).
	MaxBody int64
	// SyncAlways puts every admitted event on the disk before the relay
	// acknowledges it: it then survives a power loss, not only a crash of
	// the relay. The batches acknowledged while one sync runs share the
	// next (storeSync). Without it the server syncs every
	// DefaultSyncInterval. An external NATS syncs as its own configuration
	// says.
	SyncAlways bool
	// Syncer syncs one of the store's files under SyncAlways; nil is
	// syncmode.FileSync (tests inject one).
	Syncer syncmode.Syncer
	// Logger receives the store's logs; nil discards them.
	Logger *slog.Logger

	// heartbeat replaces followHeartbeat when set: the package's tests
	// shorten it (export_test.go) to see a lost stream sooner. nats.go
	// takes 500 ms at least.
	heartbeat time.Duration
}

var streamNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// JetStreamBackend is the durable Backend. Every admitted event is a message
// on one JetStream stream, on a subject per session; on a shared stream
// admission dedupe spans relays through Nats-Msg-Id, and a private store
// dedupes by itself (jetstream_strays.go). The in-memory index (a MemoryBackend) holds
// each session in (epoch, seq) order, with each entry's stream sequence, and
// does admission, trimming and fan-out exactly as the memory store does; it
// is rebuilt from the stream, in stream order, when the store opens. A
// follower reads the stream for events other relays published and admits
// them here too, so consumers of this relay see them.
type JetStreamBackend struct {
	mem *MemoryBackend
	log *slog.Logger
	srv *server.Server // nil on an external NATS
	dir string         // the embedded server's store
	// serverOpts are the options the embedded server runs with, afresh
	// for each reload (a server keeps the options it is handed).
	serverOpts func() *server.Options
	lock       *os.File // the embedded store directory's lock
	nc         *nats.Conn
	js         jetstream.JetStream
	stream     jetstream.Stream
	name       string
	scfg       jetstream.StreamConfig
	subject    string // session subject prefix, ending in "."
	live       string // core subject prefix for live-only events, ending in "."
	liveOut    string // the live subject this relay publishes to: live + identity
	origin     string
	// identity is this relay's name on the stream's subjects (see
	// natsauth.go); credentialed says the NATS authenticated it, and then
	// it routes no command from a relay the NATS did not.
	identity     string
	credentialed bool
	timeout      time.Duration
	replicas     int
	// followBytes bounds one pull of the follower; see followBytes.
	followBytes int

	// private is an embedded store with no port: nothing but this relay
	// writes the stream, so nothing needs following after the rebuild, and
	// evicted sessions are purged from it. A shared stream is bounded by
	// its own limits instead: one relay's eviction is not another's.
	private bool
	// maxEvent is the largest event the stream takes (see MaxEventBytes).
	maxEvent int64
	// mixed says a private store holds messages with an identity in their
	// subject (written while it listened), so its purges cover those too.
	mixed bool

	// Ingest is pipelined: batches are published one after another under
	// pubMu, each taking the next ticket, and wait for their acks without
	// it; they are then admitted strictly in ticket order, so stream order
	// stays admission order while a second batch's publish overlaps the
	// first one's wait.
	pubMu      sync.Mutex
	nextTicket uint64
	admitMu    sync.Mutex
	admitCond  *sync.Cond
	admitted   uint64 // tickets admitted or abandoned so far
	// admittedN mirrors admitted for a read without admitMu: a batch that
	// saw every earlier ticket admitted before it asked the index what it
	// holds need not ask again at its admission (see dropStoredDuplicates).
	admittedN atomic.Uint64

	routes jsRoutes

	// health is whether the stream can store; see storeHealth.
	health storeHealth

	// sync is the group commit under SyncAlways (nil: the server's interval).
	sync *storeSync
	// snapshot is where a private embedded store keeps its index between
	// runs (jssnap.go); empty for any other. indexedSeq is the highest
	// stream sequence the index reflects; guarded by admitMu.
	snapshot   string
	indexedSeq uint64
	// fromSnapshot is the stream sequence the start's snapshot reflected
	// (0: the index was rebuilt from the whole stream).
	fromSnapshot uint64

	purges chan purge
	strays chan stray // a private store's stored copies nobody admitted
	// ncClosed is closed once nc's callbacks are done after it closed.
	ncClosed chan struct{}
	// deleteMsg deletes a stored copy; nil is the stream's DeleteMsg
	// (tests stand in a slow one).
	deleteMsg func(ctx context.Context, seq uint64) error
	// strayTimeout bounds each wait of deleteStrays; only its goroutine
	// reads it.
	strayTimeout time.Duration
	stop         context.CancelFunc
	group        *errgroup.Group
	closeMu      sync.Once

	rebuiltEvents uint64
	rebuildTime   time.Duration
	remote        atomic.Uint64
	pubErrors     atomic.Uint64
	purged        atomic.Uint64
	redeliveries  atomic.Uint64

	stateMu   sync.Mutex
	state     jetstream.StreamState
	stateTime time.Time

	// heartbeat paces the follower's idle heartbeats (followHeartbeat).
	heartbeat time.Duration
}

type purge struct {
	session string
	before  uint64
}

// OpenJetStream starts (or connects to) NATS, creates or updates the stream,
// rebuilds the index from it and starts following it. The store serves once
// this returns; Close releases it.
func OpenJetStream(ctx context.Context, cfg JetStreamConfig) (*JetStreamBackend, error) {
	if cfg.Stream == "" {
		cfg.Stream = DefaultStream
	}
	if !streamNameRE.MatchString(cfg.Stream) {
		return nil, fmt.Errorf("jetstream store: stream name %q: use letters, digits, - and _ (at most 64)", cfg.Stream)
	}
	if cfg.URL == "" && cfg.Dir == "" {
		return nil, errors.New("jetstream store: an embedded store needs a directory")
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxBody > MaxJetStreamEvent {
		return nil, fmt.Errorf("jetstream store: AEP_MAX_BODY %d is above the %d bytes a stream message carries: lower it, or use the memory store", cfg.MaxBody, MaxJetStreamEvent)
	}
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	mem := NewMemoryBackendWithBudget(cfg.Buffer, cfg.MaxSessions, cfg.BufferBytes)
	defaults.Set(&cfg.heartbeat, followHeartbeat)
	b := &JetStreamBackend{
		heartbeat:    cfg.heartbeat,
		mem:          mem,
		log:          cfg.Logger,
		name:         cfg.Stream,
		subject:      "aep." + cfg.Stream + ".s.",
		live:         "aep." + cfg.Stream + ".live.",
		origin:       ulid.Make().String(),
		timeout:      DefaultPublishTimeout,
		replicas:     cfg.Replicas,
		health:       storeHealth{log: cfg.Logger},
		followBytes:  followBytes,
		private:      cfg.URL == "" && cfg.Listen == "",
		purges:       make(chan purge, 1024),
		strays:       make(chan stray, strayQueue),
		strayTimeout: DefaultPublishTimeout,
	}
	if b.private {
		b.snapshot = filepath.Join(cfg.Dir, snapshotName)
	}
	b.admitCond = sync.NewCond(&b.admitMu)
	b.routes.wake = make(chan struct{}, 1)
	if b.private {
		// The index decides what a session keeps, by position; the stream
		// keeps everything from the session's lowest held message on, so a
		// rebuild replays every arrival that shaped what the index holds.
		mem.onDrop(b.queuePurge, b.queuePurge)
	}
	sctx, cancel := context.WithTimeout(ctx, DefaultStartTimeout)
	defer cancel()
	if err := b.connect(sctx, cfg); err != nil {
		b.shutdown()
		return nil, err
	}
	if err := b.setupStream(sctx, cfg, mem); err != nil {
		b.shutdown()
		return nil, err
	}
	if cfg.SyncAlways && b.srv != nil {
		sync, err := newStoreSync(cfg.Dir, cfg.Stream, cfg.Syncer)
		if err != nil {
			b.shutdown()
			return nil, err
		}
		b.sync = sync
	}
	// The rebuild is bounded by the caller's context, not the start
	// timeout: a large stream takes as long as it takes to read.
	if err := b.follow(ctx); err != nil {
		b.shutdown()
		return nil, err
	}
	return b, nil
}

func (b *JetStreamBackend) connect(ctx context.Context, cfg JetStreamConfig) error {
	opts := []nats.Option{nats.Name("aep-kimi relay " + b.origin), nats.MaxReconnects(-1), nats.ReconnectWait(b.heartbeat / 2),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			b.log.Warn("jetstream store: nats", "subject", subject, "err", err)
		})}
	url := cfg.URL
	if url == "" {
		if err := b.lockDir(cfg.Dir); err != nil {
			return err
		}
		auth, users, err := b.embeddedAuth(cfg)
		if err != nil {
			return err
		}
		opts = append(opts, auth)
		host, port, err := listenAddr(cfg.Listen)
		if err != nil {
			return err
		}
		if cfg.Listen != "" && port == 0 {
			// nats-server reads port 0 as its default, 4222; the caller
			// asked for any free port. It is pinned once known (below), so
			// a reload keeps the address second relays were given.
			port = server.RANDOM_PORT
		}
		b.dir = cfg.Dir
		b.serverOpts = func() *server.Options {
			return &server.Options{
				// Every client authenticates, the relay's own in-process
				// connection too (see embeddedUsers).
				Nkeys:      users,
				ServerName: "aep-kimi-relay",
				JetStream:  true,
				StoreDir:   cfg.Dir,
				NoSigs:     true,
				NoLog:      true,
				MaxPayload: int32(cfg.MaxBody + headroom),
				DontListen: cfg.Listen == "",
				// Every admitted event is in the operating system's hands when
				// acknowledged (it survives the relay's crash); this bounds how
				// long it may wait there for the disk. Under SyncAlways the
				// relay syncs each batch itself (storeSync): the server's own
				// sync-always would sync each message on its own.
				SyncInterval: DefaultSyncInterval,
				Host:         host,
				Port:         port,
			}
		}
		srv, err := server.NewServer(b.serverOpts())
		if err != nil {
			return fmt.Errorf("jetstream store: embedded server: %w", err)
		}
		b.srv = srv
		srv.SetLogger(natsLogger{b.log}, false, false)
		srv.Start()
		deadline, _ := ctx.Deadline()
		if !srv.ReadyForConnections(time.Until(deadline)) {
			return fmt.Errorf("jetstream store: embedded server in %s did not start", cfg.Dir)
		}
		opts = append(opts, nats.InProcessServer(srv))
		if cfg.Listen != "" {
			if a, ok := srv.Addr().(*net.TCPAddr); ok {
				port = a.Port
			}
			b.log.Info("jetstream store: the embedded NATS listens for clients with credentials; a second relay joins with --nats-creds "+filepath.Join(cfg.Dir, NATSCredsName),
				"nats_addr", b.NATSAddr())
		}
	} else {
		b.identity = anonymousIdentity
		switch id, ok := urlIdentity(url); {
		case cfg.CredsFile != "":
			auth, id, err := credentials(cfg.CredsFile)
			if err != nil {
				return err
			}
			opts = append(opts, auth)
			b.identity, b.credentialed = id, true
		case ok:
			b.identity, b.credentialed = id, true
		}
		if cfg.CAFile != "" {
			opts = append(opts, nats.RootCAs(cfg.CAFile))
		}
	}
	b.liveOut = b.live + b.identity
	opts = append(opts, nats.CustomInboxPrefix(inboxPrefix(b.identity)))
	var nc *nats.Conn
	err := b.retryNATS(ctx, "connect", func(context.Context) error {
		var err error
		nc, err = nats.Connect(url, opts...)
		return err
	})
	if errors.Is(err, nats.ErrAuthorization) {
		return fmt.Errorf("jetstream store: connect: %w: pass the NATS user this relay may connect as with --nats-creds (another relay's embedded NATS: its $AEP_HOME/%s/%s)", err, StoreDirName, NATSCredsName)
	}
	if err != nil {
		return fmt.Errorf("jetstream store: connect: %w", err)
	}
	b.nc = nc
	// Close waits for this: the client's callbacks (the error handler's
	// logging) run on a goroutine of its own, which Close does not wait for.
	closed := make(chan struct{})
	nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
	b.ncClosed = closed
	if url != "" && (!b.credentialed || !nc.AuthRequired()) {
		b.log.Warn("jetstream store: this NATS takes clients without credentials: anyone who can reach it can read and forge events and answer held calls; give it users and the relays --nats-creds",
			"nats", urlHosts(url))
	}
	// What the server takes, less room for the subject and headers; the
	// server refuses larger events before they reach the stream.
	b.maxEvent = min(nc.MaxPayload()-headroom, MaxJetStreamEvent)
	if b.maxEvent <= 0 {
		return fmt.Errorf("jetstream store: the NATS server takes messages of at most %d bytes: too small to carry events", nc.MaxPayload())
	}
	// A request without a deadline of its own (the follower resuming) is
	// asked again rather than waited on.
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(2*DefaultMaxBatch), jetstream.WithDefaultTimeout(natsAttemptTimeout))
	if err != nil {
		return fmt.Errorf("jetstream store: %w", err)
	}
	b.js = js
	return nil
}

// NATSAddr is the address the embedded NATS listens on for clients (the
// port chosen when --nats-listen gave port 0), or "" when it listens on none.
func (b *JetStreamBackend) NATSAddr() string {
	if b.srv == nil {
		return ""
	}
	if a := b.srv.Addr(); a != nil {
		return a.String()
	}
	return ""
}

// listenAddr splits the embedded server's client address; empty is no
// port at all.
func listenAddr(listen string) (string, int, error) {
	if listen == "" {
		return "", 0, nil
	}
	host, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("jetstream store: listen address %q: %w", listen, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, fmt.Errorf("jetstream store: listen port %q: %w", p, err)
	}
	return host, port, nil
}

// lockDir makes the embedded store's directory private and takes its lock:
// two embedded servers writing one store would corrupt it.
func (b *JetStreamBackend) lockDir(dir string) error {
	if err := safefile.PrivateDir(dir); err != nil {
		return fmt.Errorf("jetstream store: %w", err)
	}
	f, err := safefile.OpenFile(filepath.Join(dir, storeLockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("jetstream store: %w", err)
	}
	if err := safefile.TryLock(f); err != nil {
		f.Close()
		return fmt.Errorf("jetstream store: another relay is using %s (%v): give each relay its own AEP_HOME, or share one stream with --nats", dir, err)
	}
	b.lock = f
	return nil
}

// embeddedAuth sets up the embedded server's users: this relay's own, made
// afresh in memory at each start, and, when the server listens, the second
// relays' from Dir. It returns how this relay authenticates.
func (b *JetStreamBackend) embeddedAuth(cfg JetStreamConfig) (nats.Option, []*server.NkeyUser, error) {
	owner, err := nkeys.CreateUser()
	if err != nil {
		return nil, nil, fmt.Errorf("jetstream store: NATS user: %w", err)
	}
	var peer nkeys.KeyPair
	if cfg.Listen != "" {
		if peer, err = peerKey(cfg.Dir); err != nil {
			return nil, nil, err
		}
	}
	users, err := embeddedUsers(owner, peer)
	if err != nil {
		return nil, nil, err
	}
	b.identity, b.credentialed = embeddedIdentity, true
	return nkeyAuth(owner, users[0].Nkey), users, nil
}

func (b *JetStreamBackend) setupStream(ctx context.Context, cfg JetStreamConfig, mem *MemoryBackend) error {
	// A private stream has no limits of its own: the index purges what it
	// trims or evicts (a byte limit counts subjects and headers too, and
	// with small events would discard what the index still holds). A
	// shared stream keeps each session's last depth arrivals, the most any
	// relay on it holds of an in-order session (one whose events arrive
	// out of order by more than the depth may come back from a rebuild
	// with a different window), within streamBytesFactor times the budget.
	perSubject, maxBytes, window := int64(-1), int64(-1), privateDuplicateWindow
	if !b.private {
		depth, _, budget := mem.limits()
		perSubject, maxBytes, window = int64(depth), budget*streamBytesFactor, DefaultDuplicateWindow
	}
	scfg := jetstream.StreamConfig{
		Name:        cfg.Stream,
		Description: "aep-kimi relay: AEP events, a subject per session",
		// A session's subject, then the publishing relay's identity; the
		// first form is what stores written before identities hold.
		Subjects:          []string{b.subject + "*", b.subject + "*.*"},
		Storage:           jetstream.FileStorage,
		Retention:         jetstream.LimitsPolicy,
		Discard:           jetstream.DiscardOld,
		MaxMsgsPerSubject: perSubject,
		MaxBytes:          maxBytes,
		Duplicates:        window,
		Replicas:          cfg.Replicas,
	}
	b.scfg = scfg
	var st jetstream.Stream
	err := b.retryNATS(ctx, "stream "+cfg.Stream, func(ctx context.Context) error {
		var err error
		st, err = b.js.CreateOrUpdateStream(ctx, scfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("jetstream store: stream %s: %w", cfg.Stream, err)
	}
	b.stream = st
	return nil
}

// follow rebuilds the index from the whole stream, then keeps admitting
// what other relays publish. Rebuilding replays the stream in stream order,
// which is the order the events were admitted in, so the index comes back
// exactly as it was: (epoch, seq) order per session, foreign events in
// their place, the same caps applied.
func (b *JetStreamBackend) follow(ctx context.Context) error {
	start := time.Now()
	ictx, cancel := context.WithTimeout(ctx, DefaultStartTimeout)
	defer cancel()
	var info *jetstream.StreamInfo
	err := b.retryNATS(ictx, "stream info", func(ctx context.Context) error {
		var err error
		info, err = b.stream.Info(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("jetstream store: stream info: %w", err)
	}
	last := info.State.LastSeq
	// A snapshot of the index leaves only the stream after it to replay.
	seq := b.loadSnapshot(info)
	var it jetstream.MessagesContext
	var pending uint64
	err = b.retryNATS(ictx, "stream consumer", func(ctx context.Context) error {
		var err error
		it, pending, err = b.messages(ctx, seq+1)
		return err
	})
	if err != nil {
		return err
	}
	batch := make([]*Message, 0, 256)
	flush := func() {
		if len(batch) > 0 {
			b.mem.Ingest(batch)
			batch = batch[:0]
		}
	}
	for pending := pending > 0 && seq < last; pending; {
		jm, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			it.Stop()
			return fmt.Errorf("jetstream store: rebuild at stream sequence %d of %d: %w", seq, last, err)
		}
		md, err := jm.Metadata()
		if err != nil {
			it.Stop()
			return fmt.Errorf("jetstream store: rebuild after stream sequence %d: %w", seq, err)
		}
		// Read up to the last sequence at open, or until nothing is pending
		// (that last message may have been deleted); what other relays
		// publish meanwhile is the follower's.
		seq = md.Sequence.Stream
		pending = md.NumPending > 0 && seq < last
		m := b.decodeStored(jm, md)
		if m != nil {
			batch = append(batch, m)
			b.rebuiltEvents++
		}
		if len(batch) == cap(batch) {
			flush()
		}
	}
	flush()
	b.indexedSeq = seq
	b.rebuildTime = time.Since(start)
	b.log.Info("jetstream store ready", "stream", b.name, "events", b.rebuiltEvents, "last_seq", last, "took", b.rebuildTime)

	gctx, stop := context.WithCancel(context.Background())
	b.stop = stop
	g, gctx := errgroup.WithContext(gctx)
	b.group = g
	if b.private {
		// Nobody else can reach this server: there is nothing to follow.
		it.Stop()
	} else {
		liveSub, err := b.nc.Subscribe(b.live+"*", b.onLive)
		if err != nil {
			it.Stop()
			stop()
			return fmt.Errorf("jetstream store: live subject: %w", err)
		}
		g.Go(func() error {
			<-gctx.Done()
			return liveSub.Unsubscribe()
		})
		g.Go(func() error { return b.followFrom(gctx, it, seq+1) })
		g.Go(func() error { return b.applyClaims(gctx) })
	}
	g.Go(func() error {
		b.watchStore(gctx)
		return nil
	})
	g.Go(func() error {
		for {
			select {
			case <-gctx.Done():
				b.drainStrays(gctx)
				return nil
			case p := <-b.purges:
				b.purge(gctx, p)
			case s := <-b.strays:
				b.deleteStrays(gctx, s)
			}
		}
	})
	return nil
}

// messages reads the stream from stream sequence from on, in order; pending
// is how many messages it held from there when the read began.
func (b *JetStreamBackend) messages(ctx context.Context, from uint64) (jetstream.MessagesContext, uint64, error) {
	cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if from > 1 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := b.js.OrderedConsumer(ctx, b.name, cfg)
	if err != nil {
		return nil, 0, fmt.Errorf("jetstream store: consumer: %w", err)
	}
	var pending uint64
	if ci := cons.CachedInfo(); ci != nil {
		pending = ci.NumPending
	}
	it, err := cons.Messages(jetstream.PullMaxMessagesWithBytesLimit(followBatch, b.followBytes),
		jetstream.PullExpiry(4*b.heartbeat), jetstream.PullHeartbeat(b.heartbeat))
	if err != nil {
		return nil, 0, fmt.Errorf("jetstream store: consumer: %w", err)
	}
	return it, pending, nil
}

// followFrom admits what other relays publish, from stream sequence next
// on, until ctx ends. When the stream is lost (a NATS node went away, a
// leader election) it reads again from where it stopped.
func (b *JetStreamBackend) followFrom(ctx context.Context, it jetstream.MessagesContext, next uint64) error {
	defer func() {
		if it != nil { // nil when a resume failed
			it.Stop()
		}
	}()
	// The iterator is stopped when ctx ends, not only once Next returns:
	// while the client re-creates a lost consumer, which it retries
	// without end (a cluster that cannot place it), Next does not return,
	// and Close waits for this goroutine.
	var mu sync.Mutex
	current := it
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		current.Stop()
	})
	defer stop()
	for {
		jm, err := it.Next(jetstream.NextContext(ctx))
		if err == nil {
			if seq := b.admitRemote(jm); seq > 0 {
				next = seq + 1
			}
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		b.log.Warn("jetstream store: follower lost the stream, resuming", "next_seq", next, "err", err)
		it.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(b.heartbeat):
			}
			if it, _, err = b.messages(ctx, next); err == nil {
				mu.Lock()
				current = it
				mu.Unlock()
				break
			}
			b.log.Warn("jetstream store: follower cannot resume yet", "next_seq", next, "err", err)
		}
	}
}

// admitRemote admits and fans out a message another relay published; one
// this relay published was admitted when it was. It returns the message's
// stream sequence.
func (b *JetStreamBackend) admitRemote(jm jetstream.Msg) uint64 {
	if b.own(jm.Subject(), jm.Headers()) {
		md, err := jm.Metadata()
		if err != nil {
			return 0
		}
		return md.Sequence.Stream
	}
	m, seq := b.decode(jm)
	if m != nil {
		if m.Kind == KindForeign && aep.IsCommand(m.Type) {
			m.RoutedTo = b.routes.deliveredTo(msgID(m.Session, m.Source, m.ID))
		}
		b.remote.Add(1)
		b.mem.Ingest([]*Message{m})
	}
	return seq
}

// decodeStored turns a stored message back into an index entry for the
// rebuild: from its index header when it has one (no subscriber sees it
// before the rebuild ends, so the envelope need not be parsed), else by
// parsing the event.
func (b *JetStreamBackend) decodeStored(jm jetstream.Msg, md *jetstream.MsgMetadata) *Message {
	session, sender, ok := b.subjectSession(jm.Subject())
	b.mixed = b.mixed || sender != ""
	if !ok {
		m, _ := b.decode(jm)
		return m
	}
	m, ok := messageFromIndex(jm.Headers().Get(indexHeader), jm.Data())
	if !ok {
		m, _ := b.decode(jm)
		return m
	}
	m.Session, m.StoreSeq, m.Ingested = session, md.Sequence.Stream, md.Timestamp
	return m
}

// subjectSession is the session a stream subject names and the identity of
// the relay that published it ("" in a store written before identities).
func (b *JetStreamBackend) subjectSession(subject string) (session, sender string, ok bool) {
	enc, ok := strings.CutPrefix(subject, b.subject)
	if !ok {
		return "", "", false
	}
	enc, sender, _ = strings.Cut(enc, ".")
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(raw) == 0 {
		return "", "", false
	}
	return string(raw), sender, true
}

// own reports a message this relay published: its subject carries this
// relay's identity, which the server let only this relay's credentials use,
// and its header this process, among relays sharing those credentials.
func (b *JetStreamBackend) own(subject string, h nats.Header) bool {
	return lastToken(subject) == b.identity && h.Get(originHeader) == b.origin
}

// decode turns a stream message back into a Message by parsing its event;
// nil for one that does not parse (never written by a relay).
func (b *JetStreamBackend) decode(jm jetstream.Msg) (*Message, uint64) {
	var seq uint64
	if md, err := jm.Metadata(); err == nil {
		seq = md.Sequence.Stream
	}
	ev, err := aep.ParseEvent(jm.Data())
	if err != nil {
		b.log.Warn("jetstream store: unreadable message skipped", "seq", seq, "err", err)
		return nil, seq
	}
	m, err := NewMessage(ev, time.Now())
	if err != nil {
		return nil, seq
	}
	m.StoreSeq = seq
	return m, seq
}

func (b *JetStreamBackend) onLive(nm *nats.Msg) {
	if b.own(nm.Subject, nm.Header) {
		return
	}
	ev, err := aep.ParseEvent(nm.Data)
	if err != nil {
		return
	}
	if m, err := NewMessage(ev, time.Now()); err == nil {
		b.remote.Add(1)
		b.mem.Ingest([]*Message{m})
	}
}

// queuePurge is the index's eviction and trim hook: it runs under the index
// lock, so it only queues. A purge that does not fit is left to the next
// one of the session, or to the next rebuild, which applies the caps again.
func (b *JetStreamBackend) queuePurge(session string, before uint64) {
	if before == 0 {
		return // no stream sequence to purge below: never the whole subject
	}
	select {
	case b.purges <- purge{session, before}:
	default:
	}
}

func (b *JetStreamBackend) purge(ctx context.Context, p purge) {
	subjects := []string{b.sessionSubject(p.session)}
	if b.mixed {
		subjects = append(subjects, subjects[0]+".*")
	}
	// A purge begun is finished, closing or not: the stream's state when
	// the store closes is then the one its index snapshot records.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.timeout)
	defer cancel()
	for _, subject := range subjects {
		if err := b.stream.Purge(pctx, jetstream.WithPurgeSubject(subject), jetstream.WithPurgeSequence(p.before)); err != nil {
			b.log.Warn("jetstream store: purge of an evicted session failed", "session", p.session, "err", err)
			return
		}
	}
	b.purged.Add(1)
}

// sessionSubject is a session's subject without a publisher's identity:
// what a private store writes, and the prefix of what shared ones do.
func (b *JetStreamBackend) sessionSubject(session string) string {
	return b.subject + base64.RawURLEncoding.EncodeToString([]byte(session))
}

// storedSubject is the subject this relay stores a session's events on. A
// private store has no other publisher, so its subjects name none.
func (b *JetStreamBackend) storedSubject(session string) string {
	if b.private {
		return b.sessionSubject(session)
	}
	return b.subject + base64.RawURLEncoding.EncodeToString([]byte(session)) + "." + b.identity
}

// msgID is the Nats-Msg-Id of an event: its admission key (session, source,
// id), hashed to a fixed length that is safe in a header.
func msgID(session, source, id string) string {
	h := sha256.New()
	h.Write([]byte(session))
	h.Write([]byte{0})
	h.Write([]byte(source))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Ingest implements Backend: it publishes the batch's held kinds to the
// stream, waits until the stream has stored every one, and only then admits
// and fans out the batch. When the stream does not take the batch, nothing
// is admitted and Err says why; what the stream did store is deduplicated
// when the sender retries.
func (b *JetStreamBackend) Ingest(msgs []*Message) IngestResult {
	return b.ingestWaking(msgs, nil)
}

// ingestWaking implements wakeDeferrer.
func (b *JetStreamBackend) ingestWaking(msgs []*Message, wake *wakeList) IngestResult {
	// A redelivery the index holds is answered from it: past the stream's
	// duplicate window it would otherwise be stored twice. It is a
	// duplicate for good: should its session be evicted before this batch
	// is admitted, it is not admitted again without a stored copy.
	// While the store is known unable to store, the batch is refused at
	// once, unless it is the one that tries again.
	probe, lost, err := b.health.admit()
	if err != nil {
		return IngestResult{Err: fmt.Errorf("jetstream store: %w", err)}
	}
	timeout := b.timeout
	if probe {
		timeout = storeProbeTimeout
	}
	checked := b.admittedN.Load()
	already := b.mem.heldAlready(msgs)
	futs, held, ticket, err := b.publishInTurn(msgs, already)
	consumed := 0
	if err == nil {
		consumed, err = b.awaitAcks(futs, held, timeout, lost)
	}
	if err == nil && b.sync != nil && len(futs) > 0 {
		err = b.sync.wait()
	}
	b.health.done(probe, len(futs) > 0, err)
	b.admitMu.Lock()
	defer b.admitMu.Unlock()
	for b.admitted != ticket {
		b.admitCond.Wait()
	}
	defer b.admitCond.Broadcast()
	b.admitted++
	// Published once the index has taken the batch (deferred calls run
	// after the return value, the index's answer, is made).
	defer b.admittedN.Store(b.admitted)
	if err != nil {
		b.pubErrors.Add(1)
		if b.private {
			b.discard(held, futs, consumed)
		}
		return IngestResult{Err: fmt.Errorf("jetstream store: %w", err)}
	}
	if b.private && checked != ticket {
		b.dropStoredDuplicates(msgs, already)
	}
	for _, m := range held {
		b.indexedSeq = max(b.indexedSeq, m.StoreSeq)
	}
	return b.mem.ingest(msgs, already, wake)
}

// publishInTurn publishes msgs under pubMu and takes the next ticket, which
// orders the batch's admission after every batch published before it.
func (b *JetStreamBackend) publishInTurn(msgs []*Message, already []bool) ([]jetstream.PubAckFuture, []*Message, uint64, error) {
	b.pubMu.Lock()
	defer b.pubMu.Unlock()
	ticket := b.nextTicket
	b.nextTicket++
	futs, held, err := b.publish(msgs, already)
	return futs, held, ticket, err
}

// dupKey is an event's admission key.
type dupKey struct{ session, source, id string }

// publish sends msgs to the stream without waiting: the held kinds to their
// session's subject, live-only events to the live subject. The caller holds
// pubMu, so batches reach the stream in ticket order. On an error it returns
// what it did publish. A private store publishes an event the batch repeats
// once (the stream dedupes nothing for it); the repeat is marked already.
func (b *JetStreamBackend) publish(msgs []*Message, already []bool) ([]jetstream.PubAckFuture, []*Message, error) {
	futs := make([]jetstream.PubAckFuture, 0, len(msgs))
	held := make([]*Message, 0, len(msgs))
	var inBatch map[dupKey]struct{}
	if b.private && len(msgs) > 1 {
		inBatch = make(map[dupKey]struct{}, len(msgs))
	}
	for i, m := range msgs {
		if already[i] {
			b.redeliveries.Add(1)
			continue
		}
		if m.Kind == KindAgent || m.Session == "" {
			// Live-only: other relays' consumers see it, nothing keeps it.
			if b.private {
				continue
			}
			nm := &nats.Msg{Subject: b.liveOut, Data: m.Raw, Header: nats.Header{originHeader: []string{b.origin}}}
			if err := b.nc.PublishMsg(nm); err != nil {
				return futs, held, err
			}
			continue
		}
		if inBatch != nil {
			k := dupKey{m.Session, m.Source, m.ID}
			if _, dup := inBatch[k]; dup {
				already[i] = true
				continue
			}
			inBatch[k] = struct{}{}
		}
		nm := b.storedMsg(m)
		// Past the pending bound (several large batches in flight) the
		// publish waits for acks rather than failing the batch.
		f, err := b.js.PublishMsgAsync(nm, jetstream.WithStallWait(b.timeout))
		if err != nil {
			return futs, held, err
		}
		futs = append(futs, f)
		held = append(held, m)
	}
	return futs, held, nil
}

// awaitAcks waits until the stream has stored every published message and
// records each one's stream sequence. A message the stream answers as a
// duplicate of one it stored earlier (a retry of a batch that was refused
// after the stream took part of it) is kept at the earlier sequence, unless
// that copy has been purged since: then it is stored again under a new id.
// It returns how many of futs it read: held[i].StoreSeq is where the
// stream stored the i-th of those, 0 where it stored nothing. It stops
// waiting after timeout, or once lost is closed (the store went down).
func (b *JetStreamBackend) awaitAcks(futs []jetstream.PubAckFuture, held []*Message, timeout time.Duration, lost <-chan struct{}) (int, error) {
	if len(futs) == 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var again []*Message
	for i, f := range futs {
		select {
		case ack := <-f.Ok():
			held[i].StoreSeq = ack.Sequence
			if ack.Duplicate && !b.stored(ctx, ack.Sequence) {
				again = append(again, held[i])
			}
		case err := <-f.Err():
			held[i].StoreSeq = 0
			return i + 1, err
		case <-ctx.Done():
			return i, fmt.Errorf("timed out after %v waiting for the stream to store the batch", timeout)
		case <-lost:
			return i, errStoreUnavailable
		}
	}
	for _, m := range again {
		nm := b.storedMsg(m)
		nm.Header[jetstream.MsgIDHeader] = []string{msgID(m.Session, m.Source, m.ID) + "-" + strconv.FormatUint(m.StoreSeq, 10)}
		ack, err := b.js.PublishMsg(ctx, nm)
		if err != nil {
			return len(futs), err
		}
		m.StoreSeq = ack.Sequence
	}
	return len(futs), nil
}

// storedMsg is the stream message that keeps m: on its session's subject,
// with its index header and, on a shared stream, its publisher and its
// admission key as the message id. A private store has one publisher and
// dedupes without the stream (see privateDuplicateWindow).
func (b *JetStreamBackend) storedMsg(m *Message) *nats.Msg {
	nm := &nats.Msg{Subject: b.storedSubject(m.Session), Data: m.Raw, Header: make(nats.Header, 3)}
	if !b.private {
		nm.Header[originHeader] = []string{b.origin}
		nm.Header[jetstream.MsgIDHeader] = []string{msgID(m.Session, m.Source, m.ID)}
	}
	if v, ok := indexValue(m); ok {
		nm.Header[indexHeader] = []string{v}
	}
	return nm
}

// stored reports whether the stream still holds the message at seq.
func (b *JetStreamBackend) stored(ctx context.Context, seq uint64) bool {
	_, err := b.stream.GetMsg(ctx, seq)
	return !errors.Is(err, jetstream.ErrMsgNotFound)
}

// MaxEventBytes is the largest event the stream takes: the server's payload
// limit less room for the subject and headers, at most MaxJetStreamEvent.
func (b *JetStreamBackend) MaxEventBytes() int64 { return b.maxEvent }

// Subscribe implements Backend.
func (b *JetStreamBackend) Subscribe(req SubscribeRequest, sub Subscriber) (func(), error) {
	return b.mem.Subscribe(req, sub)
}

// Sessions implements Backend.
func (b *JetStreamBackend) Sessions() []SessionInfo { return b.mem.Sessions() }

// Stats implements Backend.
func (b *JetStreamBackend) Stats() BackendStats { return b.mem.Stats() }

// Close stops following the stream, closes the connection and stops the
// embedded server; everything admitted is already on disk.
func (b *JetStreamBackend) Close() error {
	var err error
	b.closeMu.Do(func() {
		if b.stop != nil {
			b.stop()
			err = b.group.Wait()
			b.saveSnapshot()
		}
		b.shutdown()
	})
	return err
}

// loadSnapshot restores the index from a private store's snapshot and
// returns the stream sequence it reflects (0: none, rebuild it all). The
// snapshot is removed once read: one that outlived a crash could describe
// a stream that has since changed under the same sequences.
func (b *JetStreamBackend) loadSnapshot(info *jetstream.StreamInfo) uint64 {
	if b.snapshot == "" {
		return 0
	}
	removeSnapshotTemps(filepath.Dir(b.snapshot))
	last, err := readSnapshot(b.mem, b.snapshot, snapshotHeader{stream: b.name, created: info.Created.UnixNano(),
		msgs: info.State.Msgs, first: info.State.FirstSeq, last: info.State.LastSeq})
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	if rerr := os.Remove(b.snapshot); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		b.log.Warn("jetstream store: index snapshot not removed", "path", b.snapshot, "err", rerr)
	}
	if err != nil {
		b.log.Warn("jetstream store: index snapshot not used; rebuilding from the stream", "path", b.snapshot, "err", err)
		return 0
	}
	b.rebuiltEvents = uint64(b.mem.Stats().Events)
	b.fromSnapshot = last
	return last
}

// saveSnapshot writes a private store's index for the next start, with no
// batch being admitted meanwhile. A failure costs the next start a full
// rebuild, nothing else.
func (b *JetStreamBackend) saveSnapshot() {
	if b.snapshot == "" {
		return
	}
	b.admitMu.Lock()
	defer b.admitMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	info, err := b.stream.Info(ctx)
	if err != nil {
		b.log.Warn("jetstream store: index snapshot not written; the next start rebuilds from the stream", "err", err)
		return
	}
	start := time.Now()
	h := snapshotHeader{stream: b.name, created: info.Created.UnixNano(),
		msgs: info.State.Msgs, first: info.State.FirstSeq, last: info.State.LastSeq, lastSeq: b.indexedSeq}
	if err := writeSnapshot(b.mem, b.snapshot, h); err != nil {
		b.log.Warn("jetstream store: index snapshot not written; the next start rebuilds from the stream", "err", err)
		return
	}
	b.log.Info("jetstream store: index snapshot written", "events", b.mem.Stats().Events, "last_seq", h.lastSeq, "took", time.Since(start))
}

// ncClosedWait bounds how long closing waits for the NATS client's
// callbacks to finish.
const ncClosedWait = 5 * time.Second

func (b *JetStreamBackend) shutdown() {
	if b.nc != nil {
		b.nc.Close()
		// The closed handler runs after every callback queued before it:
		// once it has, nothing of the connection logs any more.
		t := time.NewTimer(ncClosedWait)
		select {
		case <-b.ncClosed:
		case <-t.C:
		}
		t.Stop()
	}
	if b.srv != nil {
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
	}
	b.sync.close()
	if b.lock != nil {
		b.lock.Close() // releases the lock
	}
}

// streamState is the stream's state, refreshed at most once a second for
// metrics scrapes.
func (b *JetStreamBackend) streamState() jetstream.StreamState {
	b.stateMu.Lock()
	defer b.stateMu.Unlock()
	if time.Since(b.stateTime) < time.Second {
		return b.state
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	if info, err := b.stream.Info(ctx); err == nil {
		b.state = info.State
		b.stateTime = time.Now()
	}
	return b.state
}

// storeCollectors are the store's figures for /metrics.
func (b *JetStreamBackend) storeCollectors() []prometheus.Collector {
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	return []prometheus.Collector{
		gauge("aepkimi_relay_store_stream_messages", "Messages in the JetStream stream (every relay's).",
			func() float64 { return float64(b.streamState().Msgs) }),
		gauge("aepkimi_relay_store_stream_bytes", "Bytes the JetStream stream stores, subjects and headers included.",
			func() float64 { return float64(b.streamState().Bytes) }),
		gauge("aepkimi_relay_store_stream_last_sequence", "The stream's last sequence.",
			func() float64 { return float64(b.streamState().LastSeq) }),
		gauge("aepkimi_relay_store_rebuild_seconds", "Time to rebuild the index from the stream when the store opened.",
			func() float64 { return b.rebuildTime.Seconds() }),
		gauge("aepkimi_relay_store_rebuild_events", "Stream messages read into the index when the store opened.",
			func() float64 { return float64(b.rebuiltEvents) }),
		counter("aepkimi_relay_store_remote_events_total", "Events other relays published that this relay admitted or fanned out.",
			func() float64 { return float64(b.remote.Load()) }),
		counter("aepkimi_relay_store_publish_errors_total", "Batches the stream did not store (answered 503, nothing admitted).",
			func() float64 { return float64(b.pubErrors.Load()) }),
		counter("aepkimi_relay_store_redeliveries_total", "Redelivered events the index already held, not written to the stream again.",
			func() float64 { return float64(b.redeliveries.Load()) }),
		gauge("aepkimi_relay_store_available", "1 while the store can make events durable, 0 while it cannot (/healthz says why) and batches are refused.",
			b.health.available),
		counter("aepkimi_relay_store_outages_total", "Times the store became unable to make events durable.",
			func() float64 { return float64(b.health.outages.Load()) }),
		counter("aepkimi_relay_store_refused_unavailable_total", "Batches refused at once (503) because the store was known unable to store them.",
			func() float64 { return float64(b.health.refused.Load()) }),
		counter("aepkimi_relay_store_jetstream_restarts_total", "Restarts of the embedded server's JetStream after a write error, once the disk took writes again.",
			func() float64 { return float64(b.health.restarts.Load()) }),
		counter("aepkimi_relay_store_purges_total", "Purges of the stream below what the index holds: evicted sessions and trimmed history (private store only).",
			func() float64 { return float64(b.purged.Load()) }),
	}
}
