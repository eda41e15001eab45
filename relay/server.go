package relay

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/aep-kimi/aep-kimi/internal/httpdrain"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/relay/wire"
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
	metrics *metrics
	control *controlRouter
	handler http.Handler
	started time.Time

	discovery []byte
	hello     []byte

	drainCh     chan struct{}
	drainCtx    context.Context // done once draining starts
	stopDrainFn context.CancelFunc
	drainOnce   sync.Once
	connSeq     atomic.Uint64
	sockMu      sync.Mutex     // orders socket registration against Drain
	sockets     sync.WaitGroup // socket handlers: hijacked, so http.Server.Shutdown does not wait for them
	nSSE        atomic.Int64
	nWS         atomic.Int64
	// remote carries commands to and from other relays on a shared store.
	remote RemoteRouter
	// maxEvent is the largest single event taken: MaxBody, or less when the
	// store carries less (see EventLimiter).
	maxEvent int64
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
	if s.backend == nil {
		s.backend = NewMemoryBackendWithBudget(cfg.Buffer, cfg.MaxSessions, cfg.BufferBytes)
	}
	s.maxEvent = cfg.MaxBody
	if l, ok := s.backend.(EventLimiter); ok {
		if n := l.MaxEventBytes(); n > 0 && n < s.maxEvent {
			s.maxEvent = n
			s.log.Info("the store carries smaller events than AEP_MAX_BODY: larger ones are refused", "max_event_bytes", n, "max_body", cfg.MaxBody)
		}
	}
	s.metrics = newMetrics(s.backend)
	s.control = newControlRouter(cfg.MaxSessions)
	if rr, ok := s.backend.(RemoteRouter); ok {
		s.remote = rr
		s.control.notify = rr.Claimed
		rr.ServeRoutes(s.routeHere)
	}
	s.discovery, s.hello, err = buildDiscovery(cfg)
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
	r.Use(s.accessLog, httpguard.Hosts(s.cfg.AllowedHosts))
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, wire.CodeNotFound, "no such endpoint (see GET /events)")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusMethodNotAllowed, wire.CodeMethod, "method not allowed on this endpoint")
	})
	r.Get("/healthz", s.serveHealth)
	if s.cfg.Page != nil {
		r.Handle("/", s.cfg.Page)
		r.Handle("/app/*", s.cfg.Page)
	}
	r.Group(func(r chi.Router) {
		r.Use(s.authenticate)
		r.Get("/events", s.serveDiscovery)
		r.Get("/.well-known/aep", s.serveDiscovery)
		r.Post("/events", s.serveIngest)
		r.Get("/stream", s.serveStream)
		r.Get("/socket", s.serveSocket)
		r.Get("/metrics", s.metrics.handler().ServeHTTP)
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
		"buffer", s.cfg.Buffer, "buffer_bytes", s.cfg.BufferBytes, "max_sessions", s.cfg.MaxSessions,
		"allowed_hosts", strings.Join(s.cfg.AllowedHosts, ","))
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

// authenticate checks the bearer token (header, or access_token query for
// browser clients) and strips access_token from the request so nothing
// downstream can log or echo it (AEP-0003 §8.1).
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, fromQuery := bearer(r)
		if fromQuery {
			r = stripAccessToken(r)
		}
		if s.cfg.Token != "" {
			if tok == "" && s.pageAdmits(r) {
				next.ServeHTTP(w, r)
				return
			}
			if tok == "" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="aep"`)
				writeError(w, http.StatusUnauthorized, wire.CodeUnauthorized, "missing bearer token (Authorization: Bearer <token>)")
				return
			}
			if subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) != 1 {
				writeError(w, http.StatusForbidden, wire.CodeForbidden, "invalid bearer token")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// pageAdmits reports whether r is a logged-in browser of the relay's page
// on one of the two consuming bindings, the only endpoints its cookie opens.
func (s *Server) pageAdmits(r *http.Request) bool {
	if s.cfg.Page == nil || (r.URL.Path != "/stream" && r.URL.Path != "/socket") {
		return false
	}
	return s.cfg.Page.Admits(r)
}

// authorized reports whether r carries the token (always true without one).
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.Token == "" {
		return true
	}
	tok, _ := bearer(r)
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) == 1
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
// query string, which may carry access_token.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.log.Enabled(r.Context(), slog.LevelDebug) {
			next.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		s.log.Debug("http", "method", r.Method, "path", r.URL.Path, "status", sw.status, "dur", time.Since(start))
	})
}
