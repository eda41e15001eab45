// Package fleetpage is the fleet page: a browser view of every session a
// relay holds, with the attention inbox and its answer buttons. Its files are
// embedded (plain ES modules, no build step) and served by the relay at /.
//
// The page logs in without the token ever reaching a server log or a URL the
// server sees: the operator opens a URL carrying the token in its fragment,
// the page POSTs it to /app/login and receives an HttpOnly, SameSite=Strict
// session cookie. The relay admits that cookie on /stream and /socket only
// from its own origin (Admits).
//
// A login is a random id held in a bounded server-side map with its expiry.
// The cookie carries the id, the expiry and a MAC keyed by the relay token
// and a login generation: 32 random bytes kept in Config.LoginsFile (mode
// 0600). A relay restarted with the same token and file takes its browsers
// back without a new login (the page resumes its stream); a new token ends
// them. Logging out makes a new generation, durably, before it answers: it
// ends every browser's login to this relay, across restarts, with nothing
// to remember per login. Without a file the generation lives for one run.
package fleetpage

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/defaults"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

//go:embed assets
var assets embed.FS

// Defaults for Config.
const (
	// DefaultSessionTTL is how long a browser login lasts.
	DefaultSessionTTL = 12 * time.Hour
	// DefaultMaxLogins bounds the logins held; past it the oldest is dropped.
	DefaultMaxLogins = 64
	// CookieName names the session cookie.
	CookieName = "aep_fleet"
	// maxLoginBody bounds a login request: a token and a little JSON.
	maxLoginBody = 4 << 10
	loginTimeout = 5 * time.Second
)

// Config configures a Page. The zero value serves a page for a relay
// without a token (watch-only: no login needed).
type Config struct {
	// Token is the relay's bearer token; the login exchanges it for a cookie.
	Token string
	// SessionTTL bounds one login's life.
	SessionTTL time.Duration
	// MaxLogins bounds the logins held.
	MaxLogins int
	// LoginsFile keeps the login generation across restarts; it is created
	// mode 0600, in a private directory, and replaced on logout. Empty: a
	// generation per run, so a restart ends every login.
	LoginsFile string
	// Logger receives operational logs; tokens and cookies never reach it.
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Relays lists the relays the page reads, for a page served apart from
	// them (aep-kimi dash); empty means the one relay serving the page.
	Relays []RelayRef
}

// RelayRef is one relay as the page sees it: its label and the path prefix
// its /stream and /socket are reached under on the page's own origin.
type RelayRef struct {
	Name string `json:"name"`
	Base string `json:"base"`
}

// Page serves the fleet page and its login, and tells the relay which
// browsers it logged in.
type Page struct {
	cfg    Config
	static http.Handler

	mu     sync.Mutex
	key    []byte               // MAC key for cookies, from the token and the generation
	logins map[string]time.Time // session id -> expiry
	ended  map[string]time.Time // ids logged out or evicted -> their expiry
}

// New builds a Page.
func New(cfg Config) (*Page, error) {
	err := errors.Join(
		defaults.Positive("fleet page config", "SessionTTL", &cfg.SessionTTL, DefaultSessionTTL),
		defaults.Positive("fleet page config", "MaxLogins", &cfg.MaxLogins, DefaultMaxLogins),
	)
	if err != nil {
		return nil, err
	}
	cfg.Token = httpguard.TrimToken(cfg.Token)
	defaults.Set(&cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	p := &Page{cfg: cfg, static: http.FileServerFS(sub),
		logins: make(map[string]time.Time), ended: make(map[string]time.Time)}
	gen, err := p.loadGeneration()
	if err != nil {
		return nil, err
	}
	p.key = p.keyFor(gen)
	return p, nil
}

const generationLen = 32

// loadGeneration reads the login generation from LoginsFile, making and
// keeping one when there is none (or none to keep it in).
func (p *Page) loadGeneration() ([]byte, error) {
	if p.cfg.LoginsFile == "" || p.cfg.Token == "" {
		return newGeneration(true, "")
	}
	b, err := safefile.ReadFile(p.cfg.LoginsFile)
	switch {
	case err == nil && len(b) == 2*generationLen:
		gen, derr := hex.DecodeString(string(b))
		if derr == nil {
			return gen, nil
		}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("fleet page logins file: %w", err)
	}
	return newGeneration(false, p.cfg.LoginsFile)
}

// newGeneration makes a random generation and, unless volatile, writes it
// to path (0600, atomically, in a private directory).
func newGeneration(volatile bool, path string) ([]byte, error) {
	gen := make([]byte, generationLen)
	if _, err := rand.Read(gen); err != nil {
		return nil, fmt.Errorf("fleet page login generation: %w", err)
	}
	if volatile {
		return gen, nil
	}
	if err := safefile.PrivateDir(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("fleet page logins file: %w", err)
	}
	if err := atomicfile.Write(path, []byte(hex.EncodeToString(gen)), atomicfile.Options{Perm: 0o600}); err != nil {
		return nil, fmt.Errorf("fleet page logins file: %w", err)
	}
	return gen, nil
}

func (p *Page) keyFor(gen []byte) []byte {
	mac := hmac.New(sha256.New, []byte(p.cfg.Token))
	mac.Write([]byte("aep-kimi fleet page login v2\x00"))
	mac.Write(gen)
	return mac.Sum(nil)
}

func (p *Page) macKey() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.key
}

// ServeHTTP serves GET / and /app/* (the files), POST /app/login and
// POST /app/logout, and GET /app/auth (whether a login is needed and held).
func (p *Page) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/app/login":
		p.login(w, r)
		return
	case "/app/logout":
		p.logout(w, r)
		return
	case "/app/auth":
		p.auth(w, r)
		return
	case "/app/relays":
		relays := p.cfg.Relays
		if len(relays) == 0 {
			relays = []RelayRef{{}}
		}
		writeJSON(w, http.StatusOK, relays)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		httpguard.WriteError(w, http.StatusMethodNotAllowed, "method-not-allowed", "the page's files are read with GET")
		return
	}
	h := w.Header()
	// The page runs only its own files and talks only to its own origin.
	h.Set("Content-Security-Policy", "default-src 'self'; connect-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	r2 := r
	if strings.HasPrefix(r.URL.Path, "/app/") {
		r2 = r.Clone(r.Context())
		r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/app")
	}
	p.static.ServeHTTP(w, r2)
}

// overTLS reports whether the browser reached the page over TLS: directly,
// or through a TLS-terminating proxy that says so. A cookie marked Secure
// is never sent over plain HTTP; a forged header can only make it stricter.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}

// SameOrigin reports whether a browser request comes from a page of the
// origin it is addressed to: an Origin header, when present, must name this
// Host; a browser's Sec-Fetch-Site, when present, must say same-origin.
// Browsers send one or the other on every request a foreign page can make
// with this origin's cookie, so a forged cross-site request fails here even
// where SameSite did not stop it.
func SameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return false
	}
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// Admits reports whether r carries a live login cookie from this origin.
func (p *Page) Admits(r *http.Request) bool {
	if !SameOrigin(r) {
		return false
	}
	c, err := r.Cookie(CookieName)
	if err != nil || p.cfg.Token == "" {
		return false
	}
	id, exp, ok := p.open(c.Value)
	if !ok || !p.cfg.Now().Before(exp) {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, gone := p.ended[id]; gone {
		return false
	}
	if _, held := p.logins[id]; !held {
		// Sealed by this token but not held: a login from before a
		// restart. Take it back.
		p.rememberLocked(id, exp)
	}
	return true
}

const (
	idLen  = 16
	expLen = 8
)

// seal renders a cookie value: id, expiry and their MAC.
func (p *Page) seal(id []byte, exp time.Time) string {
	b := make([]byte, 0, idLen+expLen+sha256.Size)
	b = append(b, id...)
	b = binary.BigEndian.AppendUint64(b, uint64(exp.Unix()))
	m := hmac.New(sha256.New, p.macKey())
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(m.Sum(b))
}

// open checks a cookie value's MAC and returns its id and expiry.
func (p *Page) open(v string) (string, time.Time, bool) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) != idLen+expLen+sha256.Size {
		return "", time.Time{}, false
	}
	m := hmac.New(sha256.New, p.macKey())
	m.Write(b[:idLen+expLen])
	if !hmac.Equal(m.Sum(nil), b[idLen+expLen:]) {
		return "", time.Time{}, false
	}
	exp := time.Unix(int64(binary.BigEndian.Uint64(b[idLen:idLen+expLen])), 0)
	return string(b[:idLen]), exp, true
}

type authReply struct {
	// Required is false for a relay without a token (watch-only).
	Required bool `json:"required"`
	// LoggedIn says this browser holds a live login.
	LoggedIn bool `json:"logged_in"`
}

func (p *Page) auth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		httpguard.WriteError(w, http.StatusMethodNotAllowed, "method-not-allowed", "GET /app/auth")
		return
	}
	writeJSON(w, http.StatusOK, authReply{Required: p.cfg.Token != "", LoggedIn: p.Admits(r)})
}

// pagePost admits a POST from the page's own origin, else answers the
// refusal and returns false.
func pagePost(w http.ResponseWriter, r *http.Request, what string) bool {
	if r.Method != http.MethodPost {
		httpguard.WriteError(w, http.StatusMethodNotAllowed, "method-not-allowed", what+" takes POST")
		return false
	}
	if !SameOrigin(r) {
		httpguard.WriteError(w, http.StatusForbidden, "forbidden", what+" is accepted only from this relay's own page")
		return false
	}
	return true
}

func (p *Page) login(w http.ResponseWriter, r *http.Request) {
	if !pagePost(w, r, "login") {
		return
	}
	if p.cfg.Token == "" {
		httpguard.WriteError(w, http.StatusConflict, "no-token", "this relay has no token: it is watch-only and needs no login")
		return
	}
	body, err := httpguard.ReadBody(w, r, maxLoginBody, loginTimeout)
	if err != nil {
		httpguard.WriteError(w, http.StatusBadRequest, "invalid-body", "login body unreadable or too large")
		return
	}
	var req struct {
		Token string `json:"token"`
	}
	if json.Unmarshal(body, &req) != nil {
		httpguard.WriteError(w, http.StatusBadRequest, "invalid-body", `want {"token": "..."}`)
		return
	}
	tok := httpguard.TrimToken(req.Token)
	if tok == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(p.cfg.Token)) != 1 {
		p.cfg.Logger.Info("fleet page login refused", "remote", r.RemoteAddr)
		httpguard.WriteError(w, http.StatusForbidden, "forbidden", "that token is not this relay's")
		return
	}
	id := make([]byte, idLen)
	if _, err := rand.Read(id); err != nil {
		httpguard.WriteError(w, http.StatusInternalServerError, "internal", "no randomness for a session id")
		return
	}
	exp := p.cfg.Now().Add(p.cfg.SessionTTL).Truncate(time.Second)
	p.mu.Lock()
	p.rememberLocked(string(id), exp)
	p.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: CookieName, Value: p.seal(id, exp), Path: "/", Expires: exp, MaxAge: int(p.cfg.SessionTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r),
	})
	p.cfg.Logger.Info("fleet page login", "remote", r.RemoteAddr)
	writeJSON(w, http.StatusOK, authReply{Required: true, LoggedIn: true})
}

// rememberLocked holds a login, dropping expired ones and, past MaxLogins,
// ending the one closest to expiry. p.mu is held.
func (p *Page) rememberLocked(id string, exp time.Time) {
	now := p.cfg.Now()
	for _, m := range []map[string]time.Time{p.logins, p.ended} {
		for k, e := range m {
			if !now.Before(e) {
				delete(m, k)
			}
		}
	}
	for len(p.logins) >= p.cfg.MaxLogins {
		k, e := soonest(p.logins)
		delete(p.logins, k)
		p.endLocked(k, e)
	}
	p.logins[id] = exp
}

// endLocked remembers an ended login until it would have expired, keeping
// at most a few times MaxLogins of them. p.mu is held.
func (p *Page) endLocked(id string, exp time.Time) {
	for len(p.ended) >= 4*p.cfg.MaxLogins {
		k, _ := soonest(p.ended)
		delete(p.ended, k)
	}
	p.ended[id] = exp
}

func soonest(m map[string]time.Time) (string, time.Time) {
	var key string
	var at time.Time
	for k, e := range m {
		if key == "" || e.Before(at) {
			key, at = k, e
		}
	}
	return key, at
}

func (p *Page) logout(w http.ResponseWriter, r *http.Request) {
	if !pagePost(w, r, "logout") {
		return
	}
	gone := &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r)}
	// Only a browser logged in may end the logins: a stale cookie (or none)
	// just clears itself.
	if p.cfg.Token != "" && p.Admits(r) {
		gen, err := newGeneration(p.cfg.LoginsFile == "", p.cfg.LoginsFile)
		if err != nil {
			p.cfg.Logger.Error("fleet page logout not kept", "err", err)
			httpguard.WriteError(w, http.StatusInternalServerError, "internal", "the logout could not be kept; the login still stands")
			return
		}
		p.mu.Lock()
		p.key = p.keyFor(gen)
		clear(p.logins)
		clear(p.ended)
		p.mu.Unlock()
		p.cfg.Logger.Info("fleet page logout: every browser login ended", "remote", r.RemoteAddr)
	}
	http.SetCookie(w, gone)
	writeJSON(w, http.StatusOK, authReply{Required: p.cfg.Token != "", LoggedIn: false})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v) // plain structs: cannot fail
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// LoginURL is the URL that logs a browser in to the page at base: the token
// rides in the fragment, which browsers never send to a server.
func LoginURL(base, token string) string {
	base = strings.TrimRight(base, "/") + "/"
	if token == "" {
		return base
	}
	return base + "#token=" + url.QueryEscape(token)
}
