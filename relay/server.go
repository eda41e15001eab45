package relay

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/internal/credreg"
	"github.com/aep-kimi/aep-kimi/internal/httpdrain"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/periodic"
	"github.com/aep-kimi/aep-kimi/relay/wire"
	"github.com/aep-kimi/aep-kimi/rules"
)

// ErrDrainTimeout is returned by Run and Serve when connections did not
// drain within Config.DrainTimeout; the caller should exit non-zero.
var ErrDrainTimeout = errors.New("relay: drain timed out")

// Server is an AEP collector/relay: HTTP POST ingest, SSE and WebSocket
// fan-out with replay, and command routing (AEP-0003, AEP-0004). Create it
// with NewServer and run it with Run or Serve; Handler serves it on an
// existing http.Server (then the caller owns draining via Drain).
type Server struct {
	cfg     Config
	log     *slog.Logger
	backend Backend
	// inlineIngest: the store takes events without waiting (the memory
	// store), so a socket's reader hands each event over itself instead of
	// through an ingest queue and a second goroutine, which exist to batch
	// a durable store's acknowledgements.
	inlineIngest bool
	metrics      *metrics
	control      *controlRouter
	handler      http.Handler
	started      time.Time

	discovery []byte
	// discoveryWatch is the discovery document a watcher gets: no control.
	discoveryWatch []byte
	hello          []byte
	bodies         httpguard.BodyReader // POST /events bodies, read into reused chunks
	wakes          sync.Pool            // of *wakeList, for POST /events

	drainCh     chan struct{}
	drainCtx    context.Context // done once draining starts
	stopDrainFn context.CancelFunc
	drainOnce   sync.Once
	connSeq     atomic.Uint64
	sockMu      sync.Mutex     // orders socket registration against Drain
	sockets     sync.WaitGroup // socket handlers: hijacked, so http.Server.Shutdown does not wait for them
	nSSE        atomic.Int64
	nWS         atomic.Int64
	nConns      atomic.Int64 // streams and sockets holding a MaxConnections slot
	// token is the bearer token in force (Config.Token, then what
	// TokenSource reads); changed only under the credential registry's lock.
	token  atomic.Pointer[string]
	creds  *credreg.Registry
	tokErr string // the last TokenSource failure logged; the poller's own
	// remote carries commands to and from other relays on a shared store.
	remote RemoteRouter
	// maxEvent is the largest single event taken: MaxBody, or less when the
	// store carries less (see EventLimiter).
	maxEvent int64
	// rules is the rules' state; nil without Config.Rules.
	rules *ruleState
	// assessed counts the assessments admitted.
	assessed *assessments
}

// NewServer validates cfg, fills defaults and builds the server.
func NewServer(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		backend: cfg.Backend,
		started: time.Now(),
		drainCh: make(chan struct{}),
	}
	s.drainCtx, s.stopDrainFn = context.WithCancel(context.Background())
	s.token.Store(&cfg.Token)
	s.creds = cfg.Credentials
	if s.backend == nil {
		s.backend = NewMemoryBackendWithBudget(cfg.Buffer, cfg.MaxSessions, cfg.BufferBytes)
	}
	_, s.inlineIngest = s.backend.(*MemoryBackend)
	s.maxEvent = cfg.MaxBody
	if l, ok := s.backend.(EventLimiter); ok {
		if n := l.MaxEventBytes(); n > 0 && n < s.maxEvent {
			s.maxEvent = n
			s.log.Info("the store carries smaller events than AEP_MAX_BODY: larger ones are refused", "max_event_bytes", n, "max_body", cfg.MaxBody)
		}
	}
	s.metrics = newMetrics(s.backend)
	s.assessed = newAssessments(s.metrics.reg)
	s.metrics.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "aepkimi_relay_connections_limit",
		Help: "The most streams and sockets served at once (AEP_MAX_CONNECTIONS).",
	}, func() float64 { return float64(cfg.MaxConnections) }))
	if cfg.Notify != nil {
		s.metrics.reg.MustRegister(cfg.Notify.Collectors()...)
	}
	s.rules = newRuleState(s)
	s.control = newControlRouter(cfg.MaxSessions)
	if rr, ok := s.backend.(RemoteRouter); ok {
		s.remote = rr
		s.control.notify = rr.Claimed
		rr.ServeRoutes(s.routeHere)
	}
	s.discovery, s.discoveryWatch, s.hello, err = buildDiscovery(cfg)
	if err != nil {
		return nil, err
	}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the relay's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Backend returns the storage and fan-out backend the server uses.
func (s *Server) Backend() Backend { return s.backend }

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(s.accessLog, httpguard.Hosts(s.cfg.AllowedHosts), httpguard.Forwarded(s.cfg.BehindProxy))
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		httpguard.WriteError(w, http.StatusNotFound, wire.CodeNotFound, "no such endpoint (see GET /events)")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		httpguard.WriteError(w, http.StatusMethodNotAllowed, wire.CodeMethod, "method not allowed on this endpoint")
	})
	r.Get("/healthz", s.serveHealth)
	if s.cfg.Page != nil {
		r.Handle("/", s.cfg.Page)
		r.Handle("/app/*", s.cfg.Page)
	}
	if s.cfg.Notify != nil {
		r.Handle(AnswerPath+"*", s.cfg.Notify.AnswerLinks())
	}
	r.Group(func(r chi.Router) {
		r.Use(s.authenticate)
		if s.cfg.Notify != nil {
			r.Handle(NotifyPath+"*", s.notifyAPI(s.cfg.Notify.API()))
		}
		r.Get("/events", s.serveDiscovery)
		r.Get("/.well-known/aep", s.serveDiscovery)
		r.Post("/events", s.serveIngest)
		r.Get("/stream", s.serveStream)
		r.Get("/socket", s.serveSocket)
		r.Get("/metrics", s.metrics.handler().ServeHTTP)
		if s.cfg.Rules != nil {
			r.HandleFunc("/rules", s.serveRules)
			r.HandleFunc("/rules/*", s.serveRules)
		}
	})
	return r
}

// Run listens on Config.Listen and serves until ctx is done, then drains.
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("relay: listen %s: %w", s.cfg.Listen, err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx is done, then drains: it stops accepting,
// ends every SSE stream with a ": shutting-down" comment, closes every
// socket with a closing frame and status 1001, and returns nil once all
// are gone, or ErrDrainTimeout after Config.DrainTimeout.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	posture := "watch-only: no token, control commands refused"
	if s.cfg.Token != "" {
		posture = "authenticated: bearer token required, control routing on"
	}
	s.log.Info("relay listening", "addr", ln.Addr().String(), "posture", posture,
		"buffer", s.cfg.Buffer, "buffer_bytes", s.cfg.BufferBytes, "max_sessions", s.cfg.MaxSessions, "max_connections", s.cfg.MaxConnections,
		"allowed_hosts", strings.Join(s.cfg.AllowedHosts, ","), "tls", s.cfg.TLS != nil, "behind_proxy", s.cfg.BehindProxy)
	wctx, stopWatch := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	watchers.Go(func() { s.watchCredentials(wctx) })
	if s.cfg.Rules != nil {
		watchers.Go(func() { s.cfg.Rules.Watch(wctx) })
	}
	defer func() { stopWatch(); watchers.Wait() }()
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	hs := httpdrain.NewServer(s.handler)
	hs.ErrorLog = slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)
	hs.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	drain := httpdrain.Track(hs)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.Drain()
		return fmt.Errorf("relay: serve: %w", err)
	case <-ctx.Done():
	}
	s.log.Info("relay draining")
	s.Drain()
	dctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	err := drain.Shutdown(dctx, hs)
	<-errc // Serve returns ErrServerClosed once Shutdown starts
	if err == nil {
		done := make(chan struct{})
		go func() { s.sockets.Wait(); close(done) }()
		select {
		case <-done:
		case <-dctx.Done():
			err = dctx.Err()
		}
	}
	if err != nil {
		_ = hs.Close()
		s.log.Error("relay drain timed out", "timeout", s.cfg.DrainTimeout)
		return ErrDrainTimeout
	}
	s.log.Info("relay drained")
	return nil
}

// Drain tells every stream and socket to end; it is idempotent. Serve calls
// it; callers serving Handler themselves call it before shutting down.
func (s *Server) Drain() {
	s.drainOnce.Do(func() {
		s.sockMu.Lock()
		close(s.drainCh)
		s.sockMu.Unlock()
		s.stopDrainFn()
	})
}

func (s *Server) draining() bool {
	select {
	case <-s.drainCh:
		return true
	default:
		return false
	}
}

// tokenCredential names the bearer token as a credential (ID and group);
// peopleGroup groups the people's tokens, each its own credential.
const (
	tokenCredential = "token"
	peopleGroup     = "people"
)

// authenticate checks the bearer token (header, or access_token query for
// browser clients) or the page's login, and strips access_token from the
// request so nothing downstream can log or echo it (AEP-0003 §8.1). What it
// admits holds a lease on its credential for the request's life: a stream
// or socket ends when the credential does.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, fromQuery := bearer(r)
		if fromQuery {
			r = stripAccessToken(r)
		}
		if s.cfg.Token == "" {
			next.ServeHTTP(w, r) // watch-only: nothing to hold
			return
		}
		var bind func(string) bool
		var who access.Principal
		status := http.StatusUnauthorized
		lease, ok := s.creds.Admit(func(tx *credreg.Tx) (credreg.Credential, bool) {
			if tok != "" {
				if subtle.ConstantTimeCompare([]byte(tok), []byte(*s.token.Load())) == 1 {
					who = access.Owner()
					return credreg.Credential{ID: tokenCredential, Group: tokenCredential, Principal: who.Name}, true
				}
				var ok bool
				if who, _, ok = s.cfg.People.Lookup(tok); !ok {
					status = http.StatusForbidden
					return credreg.Credential{}, false
				}
				return credreg.Credential{ID: "person:" + who.Name, Group: peopleGroup, Principal: who.Name}, true
			}
			if s.cfg.Page == nil || !pagePath(r.URL.Path) {
				return credreg.Credential{}, false // the cookie opens only the consuming bindings and the rules
			}
			cred, p, b, ok := s.cfg.Page.Admit(tx, r, r.URL.Path == "/socket")
			bind, who = b, p
			return cred, ok
		})
		switch {
		case !ok && status == http.StatusForbidden:
			httpguard.WriteError(w, http.StatusForbidden, wire.CodeForbidden, "invalid bearer token")
			return
		case !ok:
			w.Header().Set("WWW-Authenticate", `Bearer realm="aep"`)
			httpguard.WriteError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "missing bearer token (Authorization: Bearer <token>)")
			return
		}
		defer lease.Release()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), admissionKey{}, &admission{lease: lease, bind: bind, who: who})))
	})
}

// pagePath reports whether a logged-in page may reach path with its cookie:
// the consuming bindings, the rules (whose view it shows, and which an
// answer can turn into one) and the notification API (a device subscribing
// from the page; the Origin checks still apply).
func pagePath(path string) bool {
	return path == "/stream" || path == "/socket" || path == rules.APIPath || strings.HasPrefix(path, rules.APIPath+"/") ||
		strings.HasPrefix(path, NotifyPath)
}

// notifyAPI guards the notification API as the rules are guarded: no
// page of another origin may subscribe a device or remove one.
func (s *Server) notifyAPI(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !httpguard.SameOrigin(r) {
			httpguard.WriteError(w, http.StatusForbidden, wire.CodeForbidden, "a request from another origin may not read or change notification subscriptions")
			return
		}
		next.ServeHTTP(w, r)
	})
}

type admissionKey struct{}

// admission is what authenticate admitted a request with. The nil
// admission is a watch-only relay's: nothing ends it.
type admission struct {
	lease *credreg.Lease
	// bind, when set, must accept the secret a socket's hello carries
	// (a page login whose upgrade could not present it).
	bind func(secret string) bool
	// who is the principal the credential speaks for.
	who access.Principal
}

func admissionOf(r *http.Request) *admission {
	a, _ := r.Context().Value(admissionKey{}).(*admission)
	return a
}

// PrincipalOf is who r was authenticated as: the owner for the relay's own
// token, a person for theirs, and for a page login the principal of the
// token it was made with. False on a watch-only relay (no token), where
// nobody is authenticated, and outside the authenticated endpoints.
func PrincipalOf(r *http.Request) (access.Principal, bool) {
	a := admissionOf(r)
	if a == nil {
		return access.Principal{}, false
	}
	return a.who, true
}

// done is closed when the credential ends; nil (never) without one.
func (a *admission) done() <-chan struct{} {
	if a == nil {
		return nil
	}
	return a.lease.Done()
}

// ended says why the credential ended, or "" while it stands.
func (a *admission) ended() string {
	if a == nil {
		return ""
	}
	return a.lease.Reason()
}

// authorized reports whether r carries the token (always true without one).
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	tok, _ := bearer(r)
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(*s.token.Load())) == 1
}

// watchCredentials polls the token source and the page's key until ctx
// ends (see Config.TokenSource).
func (s *Server) watchCredentials(ctx context.Context) {
	if s.cfg.Token == "" || (s.cfg.TokenSource == nil && s.cfg.Page == nil && s.cfg.People == nil) {
		return
	}
	periodic.Every(ctx, s.cfg.TokenPoll, s.pollCredentials)
}

func (s *Server) pollCredentials() {
	tok := *s.token.Load()
	if src := s.cfg.TokenSource; src != nil {
		next, err := src()
		next = httpguard.TrimToken(next)
		problem := ""
		switch {
		case err != nil:
			problem = err.Error()
		case next == "":
			problem = "the token source is empty"
		case next != tok:
			s.setToken(next)
			tok = next
		}
		if problem != s.tokErr && problem != "" {
			s.log.Warn("relay token not re-read; the token in force stays", "err", problem)
		}
		s.tokErr = problem
	}
	if s.cfg.Page != nil {
		if err := s.cfg.Page.Rekey(tok); err != nil {
			s.log.Warn("fleet page login key not re-read", "err", err)
		}
	}
	if s.cfg.People != nil {
		if apply := s.cfg.People.Reload(); apply != nil {
			s.creds.Update(func(tx *credreg.Tx) {
				for _, name := range apply() {
					n := tx.End(credreg.ReasonRevoked, credreg.ByPrincipal(name))
					s.log.Info("a person's token was revoked or changed: what it opened is closed", "who", name, "connections", n)
				}
			})
		}
		s.cfg.People.Flush()
	}
}

// setToken puts tok in force and ends every connection the old token
// admitted.
func (s *Server) setToken(tok string) {
	n := 0
	s.creds.Update(func(tx *credreg.Tx) {
		s.token.Store(&tok)
		n = tx.End(credreg.ReasonTokenChanged, credreg.InGroup(tokenCredential))
	})
	s.log.Info("relay token replaced: the connections the old one admitted are closed", "connections", n)
}

// takeConn holds one of the MaxConnections slots for a stream or socket,
// or answers 503 and counts the refusal.
func (s *Server) takeConn(w http.ResponseWriter, binding string) (release func(), ok bool) {
	for {
		n := s.nConns.Load()
		if n >= int64(s.cfg.MaxConnections) {
			s.metrics.refused.WithLabelValues(binding).Inc()
			w.Header().Set("Retry-After", strconv.Itoa(connRetryAfter))
			httpguard.WriteError(w, http.StatusServiceUnavailable, wire.CodeLimitExceeded,
				fmt.Sprintf("this relay already serves %d streams and sockets, its limit (AEP_MAX_CONNECTIONS); try again later", s.cfg.MaxConnections))
			return nil, false
		}
		if s.nConns.CompareAndSwap(n, n+1) {
			return func() { s.nConns.Add(-1) }, true
		}
	}
}

func bearer(r *http.Request) (token string, fromQuery bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return httpguard.TrimToken(tok), false
		}
	}
	if r.URL.Query().Has("access_token") {
		return httpguard.TrimToken(r.URL.Query().Get("access_token")), true
	}
	return "", false
}

func stripAccessToken(r *http.Request) *http.Request {
	r2 := r.Clone(r.Context())
	q := r2.URL.Query()
	q.Del("access_token")
	r2.URL.RawQuery = q.Encode()
	r2.RequestURI = r2.URL.RequestURI()
	return r2
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController and the socket upgrade reach the
// underlying writer (flush, hijack, deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// accessLog logs method, path and status at debug level. It never logs the
// query string, which may carry access_token, nor a path segment that may
// be a secret (an answer link's token: httpguard.LogPath), nor a header.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.log.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		s.log.Debug("http", "method", r.Method, "path", httpguard.LogPath(r.URL.Path, AnswerPath), "status", sw.status, "dur", time.Since(start))
	})
}
