// Package fleetpage is the fleet page: a browser view of every session a
// relay holds, with the attention inbox and its answer buttons. Its files are
// embedded (plain ES modules and two classic scripts, the service worker and
// boot.js, which sends the login while the page parses; no build step) and
// served by the relay at /.
//
// The page logs in without the token ever reaching a server log or a URL the
// server sees: the operator opens a URL carrying the token in its fragment,
// the page POSTs it to /app/login and receives an HttpOnly, SameSite=Strict
// session cookie and, in the answer's body, the login's bound secret. The
// relay admits the cookie on /stream and /socket only from its own origin
// and only with that secret (Admit).
//
// The secret is what a stolen cookie lacks. Browsers scope cookies by host,
// not port: a page on another port of the same host (another local user's
// listener) receives the cookie with every request the browser makes to
// it. The page keeps the secret in its tab's session storage, which is
// scoped by origin, port included, and presents it in a header on every
// request (BindHeader) and in its socket's hello; a request with the
// cookie alone is refused. A reload keeps the tab's secret; a new tab logs
// in again through the URL. Each server's cookie is named after the
// address it is reached at (CookieName), so two servers on one host, a
// relay and a dash, never overwrite each other's.
//
// A login is a random id held in a bounded server-side map with its expiry.
// The cookie carries the id, the expiry and a MAC keyed by the relay token
// and a login generation: 32 random bytes kept in Config.LoginsFile (mode
// 0600). The bound secret is a MAC of the id under the same key. A relay
// restarted with the same token and file takes its browsers back without a
// new login (the page resumes its stream); a new token ends them. Logging
// out makes a new generation, durably, before it answers: it ends every
// browser's login to this relay, across restarts, with nothing to remember
// per login. Without a file the generation lives for one run.
//
// Every stream and socket a login opened is tied to it in the credential
// registry (Config.Credentials): a logout, the login's expiry, a new token
// (Rekey) or a replaced logins file ends them at once.
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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/access"
	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/credreg"
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
	// DefaultLoginBurst is how many login attempts one client address may
	// make at once; past it, one more per DefaultLoginEvery.
	DefaultLoginBurst = 10
	// DefaultLoginEvery paces login attempts past the burst.
	DefaultLoginEvery = 6 * time.Second
	// CookiePrefix begins every session cookie's name (CookieName).
	CookiePrefix = "aep_fleet_"
	// BindHeader carries a login's bound secret on the page's requests.
	BindHeader = "AEP-Login"
	// LoginGroup is the credential group of the page's logins.
	LoginGroup = "page-login"
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
	// LoginBurst and LoginEvery rate-limit login attempts per client
	// address: LoginBurst at once, then one per LoginEvery.
	LoginBurst int
	LoginEvery time.Duration
	// Credentials ties each connection a login admits to it; nil means a
	// registry of the page's own (Page.Credentials), which the relay
	// serving the page then shares.
	Credentials *credreg.Registry
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
	// People are the relay's people: a login made with one of their tokens
	// carries their principal, and ends with their token. Nil: only the
	// relay's token logs in, as the owner.
	People *access.Roster
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
	cfg     Config
	static  http.Handler
	reg     *credreg.Registry
	limiter *loginLimiter

	// Changed only under the registry's lock (credreg.Registry.Update) and
	// mu, so an admission sees a login state whole, and a change ends the
	// connections of the logins it ends before any new one is admitted.
	mu     sync.Mutex
	token  string
	gen    []byte               // the login generation (LoginsFile)
	key    []byte               // MAC key for cookies, from the token and the generation
	logins map[string]time.Time // session id -> expiry
	ended  map[string]time.Time // ids logged out or evicted -> their expiry
}

// New builds a Page.
func New(cfg Config) (*Page, error) {
	const component = "fleet page config"
	err := errors.Join(
		defaults.Positive(component, "SessionTTL", &cfg.SessionTTL, DefaultSessionTTL),
		defaults.Positive(component, "MaxLogins", &cfg.MaxLogins, DefaultMaxLogins),
		defaults.Positive(component, "LoginBurst", &cfg.LoginBurst, DefaultLoginBurst),
		defaults.Positive(component, "LoginEvery", &cfg.LoginEvery, DefaultLoginEvery),
	)
	if err != nil {
		return nil, err
	}
	cfg.Token = httpguard.TrimToken(cfg.Token)
	defaults.Set(&cfg.Logger, slog.New(slog.DiscardHandler))
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Credentials == nil {
		cfg.Credentials = &credreg.Registry{Now: cfg.Now}
	}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	p := &Page{cfg: cfg, static: http.FileServerFS(sub), reg: cfg.Credentials,
		limiter: newLoginLimiter(cfg.LoginBurst, cfg.LoginEvery), token: cfg.Token,
		logins: make(map[string]time.Time), ended: make(map[string]time.Time)}
	gen, err := p.loadGeneration()
	if err != nil {
		return nil, err
	}
	p.gen, p.key = gen, p.keyFor(gen)
	return p, nil
}

// Credentials is the registry the page's logins are held in.
func (p *Page) Credentials() *credreg.Registry { return p.reg }

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

// keyFor is the cookie key for gen under the current token. p.mu is held
// (or p is not yet shared).
func (p *Page) keyFor(gen []byte) []byte {
	mac := hmac.New(sha256.New, []byte(p.token))
	mac.Write([]byte("aep-kimi fleet page login v2\x00"))
	mac.Write(gen)
	return mac.Sum(nil)
}

// Rekey adopts token when it differs from the page's (the relay's token
// file was replaced; empty keeps the current one) and re-reads LoginsFile,
// adopting a generation another process wrote there or writing a new one
// when the file is gone. Either change ends every login and the
// connections they opened. The relay calls it on every poll of its token.
func (p *Page) Rekey(token string) error {
	token = httpguard.TrimToken(token)
	var ferr error
	p.reg.Update(func(tx *credreg.Tx) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.token == "" {
			return // watch-only: no logins to key
		}
		reason := ""
		if token != "" && token != p.token {
			p.token, reason = token, credreg.ReasonTokenChanged
		}
		if p.cfg.LoginsFile != "" {
			gen, changed, err := p.fileGenerationLocked()
			if err != nil {
				ferr = err
			} else if changed {
				p.gen = gen
				if reason == "" {
					reason = credreg.ReasonKeyRotated
				}
			}
		}
		if reason == "" {
			return
		}
		p.key = p.keyFor(p.gen)
		clear(p.logins)
		clear(p.ended)
		if n := tx.End(reason, credreg.InGroup(LoginGroup)); n > 0 || reason == credreg.ReasonTokenChanged {
			p.cfg.Logger.Info("fleet page: every browser login ended", "reason", reason, "connections", n)
		}
	})
	return ferr
}

// fileGenerationLocked reads LoginsFile and reports whether it holds
// another generation than the page's: one written there by someone else,
// or, when the file is gone or unreadable as a generation, a new one it
// writes. p.mu is held.
func (p *Page) fileGenerationLocked() ([]byte, bool, error) {
	b, err := safefile.ReadFile(p.cfg.LoginsFile)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("fleet page logins file: %w", err)
	}
	if err == nil && len(b) == 2*generationLen {
		gen, derr := hex.DecodeString(string(b))
		if derr == nil {
			return gen, !hmac.Equal(gen, p.gen), nil
		}
	}
	gen, err := newGeneration(false, p.cfg.LoginsFile)
	if err != nil {
		return nil, false, err
	}
	return gen, true, nil
}

// The service worker and the web app manifest, as the page links them.
const (
	swPath       = "/app/sw.js"
	manifestPath = "/app/manifest.webmanifest"
)

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
		httpguard.WriteJSON(w, http.StatusOK, relays)
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
	switch r.URL.Path {
	case swPath:
		// The worker lives under /app/ and serves the whole page: its
		// scope is the root.
		h.Set("Service-Worker-Allowed", "/")
	case manifestPath:
		h.Set("Content-Type", "application/manifest+json")
	}
	r2 := r
	if strings.HasPrefix(r.URL.Path, "/app/") {
		r2 = r.Clone(r.Context())
		r2.URL.Path = strings.TrimPrefix(r.URL.Path, "/app")
	}
	p.static.ServeHTTP(w, r2)
}

// browserSameOrigin is httpguard.SameOrigin for a request that carries a cookie: it
// must also carry Origin or Sec-Fetch-Site, as a browser does, so a plain
// client replaying a cookie it took is refused even before its secret is
// checked.
func browserSameOrigin(r *http.Request) bool {
	if r.Header.Get("Origin") == "" && r.Header.Get("Sec-Fetch-Site") == "" {
		return false
	}
	return httpguard.SameOrigin(r)
}

// CookieName is the session cookie's name on the server reached at host
// (the request's Host): the relay and a dash on one machine, or two relays,
// each have their own.
func CookieName(host string) string {
	sum := sha256.Sum256([]byte("aep-kimi fleet cookie\x00" + strings.ToLower(host)))
	return CookiePrefix + hex.EncodeToString(sum[:6])
}

// Admit checks r's login: its cookie, from the page's own origin, and the
// secret bound to it, in BindHeader. A socket upgrade cannot carry the
// header (browsers add none to one): with socket set and no header, the
// login is admitted pending its hello, and bind reports whether the secret
// the hello brings is the login's; the socket must be refused unless it
// is. Admit runs under the registry's lock: tx is the registry's.
func (p *Page) Admit(tx *credreg.Tx, r *http.Request, socket bool) (cred credreg.Credential, who access.Principal, bind func(secret string) bool, ok bool) {
	l, ok := p.admit(tx, r, socket)
	if !ok {
		return credreg.Credential{}, access.Principal{}, nil, false
	}
	cred = credreg.Credential{ID: "login:" + hex.EncodeToString([]byte(l.id)), Group: LoginGroup, Expires: l.exp, Principal: l.who.Name}
	if r.Header.Get(BindHeader) == "" {
		bind = func(secret string) bool { return p.bound(l.id, secret) }
	}
	return cred, l.who, bind, true
}

// login is one browser's login as a request presents it.
type login struct {
	id  string
	exp time.Time
	who access.Principal
}

// admit is Admit's check: the login's id, expiry and principal. A request
// without the bound secret passes only as a socket upgrade.
func (p *Page) admit(tx *credreg.Tx, r *http.Request, socket bool) (login, bool) {
	if !browserSameOrigin(r) {
		return login{}, false
	}
	c, err := r.Cookie(CookieName(r.Host))
	if err != nil {
		return login{}, false
	}
	secret := r.Header.Get(BindHeader)
	if secret == "" && !socket {
		return login{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.token == "" {
		return login{}, false
	}
	id, exp, ref, ok := p.openLocked(c.Value)
	if !ok || !p.cfg.Now().Before(exp) {
		return login{}, false
	}
	who, ok := p.principal(ref)
	if !ok {
		return login{}, false // made with a token revoked since
	}
	if secret != "" && !hmac.Equal([]byte(secret), []byte(p.bindingLocked(id))) {
		return login{}, false
	}
	if _, gone := p.ended[id]; gone {
		return login{}, false
	}
	if _, held := p.logins[id]; !held {
		// Sealed by this token but not held: a login from before a
		// restart. Take it back.
		p.rememberLocked(tx, id, exp)
	}
	return login{id: id, exp: exp, who: who}, true
}

// principal is who a login made with the token ref names speaks for: the
// zero ref is the relay's own token, the owner.
func (p *Page) principal(ref access.Ref) (access.Principal, bool) {
	if ref == (access.Ref{}) {
		return access.Owner(), true
	}
	return p.cfg.People.Resolve(ref)
}

// bound reports whether secret is the bound secret of login id under the
// current key, and the login still held.
func (p *Page) bound(id, secret string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, held := p.logins[id]; !held || secret == "" {
		return false
	}
	return hmac.Equal([]byte(secret), []byte(p.bindingLocked(id)))
}

// bindingLocked is the secret bound to login id: a MAC of the id under the
// current key, so a logout or a new token ends it with the cookie. p.mu is
// held.
func (p *Page) bindingLocked(id string) string {
	m := hmac.New(sha256.New, p.key)
	m.Write([]byte("aep-kimi fleet page binding\x00"))
	m.Write([]byte(id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

const (
	idLen  = 16
	expLen = 8
	refLen = len(access.Ref{})
	// sealedLen is a cookie's sealed part: id, expiry and the token ref.
	sealedLen = idLen + expLen + refLen
)

// sealLocked renders a cookie value: id, expiry, the ref of the token the
// login was made with (zero: the relay's own) and their MAC. p.mu is held.
func (p *Page) sealLocked(id []byte, exp time.Time, ref access.Ref) string {
	b := make([]byte, 0, sealedLen+sha256.Size)
	b = append(b, id...)
	b = binary.BigEndian.AppendUint64(b, uint64(exp.Unix()))
	b = append(b, ref[:]...)
	m := hmac.New(sha256.New, p.key)
	m.Write(b)
	return base64.RawURLEncoding.EncodeToString(m.Sum(b))
}

// openLocked checks a cookie value's MAC and returns its id, expiry and
// token ref. p.mu is held.
func (p *Page) openLocked(v string) (string, time.Time, access.Ref, bool) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(b) != sealedLen+sha256.Size {
		return "", time.Time{}, access.Ref{}, false
	}
	m := hmac.New(sha256.New, p.key)
	m.Write(b[:sealedLen])
	if !hmac.Equal(m.Sum(nil), b[sealedLen:]) {
		return "", time.Time{}, access.Ref{}, false
	}
	exp := time.Unix(int64(binary.BigEndian.Uint64(b[idLen:idLen+expLen])), 0)
	var ref access.Ref
	copy(ref[:], b[idLen+expLen:sealedLen])
	return string(b[:idLen]), exp, ref, true
}

type authReply struct {
	// Required is false for a relay without a token (watch-only).
	Required bool `json:"required"`
	// LoggedIn says this browser holds a live login and presented its
	// bound secret.
	LoggedIn bool `json:"logged_in"`
	// Login is the bound secret, in the login's answer only.
	Login string `json:"login,omitempty"`
	// Name, Role and Capture say who the login speaks for, when logged in.
	Name    string `json:"name,omitempty"`
	Role    string `json:"role,omitempty"`
	Capture string `json:"capture,omitempty"`
}

// withPrincipal fills the reply's who.
func (a authReply) withPrincipal(who access.Principal) authReply {
	a.Name, a.Role, a.Capture = who.Name, string(who.Role), who.Capture.String()
	return a
}

func (p *Page) required() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.token != ""
}

func (p *Page) auth(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		httpguard.WriteError(w, http.StatusMethodNotAllowed, "method-not-allowed", "GET /app/auth")
		return
	}
	var l login
	var in bool
	p.reg.Update(func(tx *credreg.Tx) { l, in = p.admit(tx, r, false) })
	reply := authReply{Required: p.required(), LoggedIn: in}
	if in {
		reply = reply.withPrincipal(l.who)
	}
	httpguard.WriteJSON(w, http.StatusOK, reply)
}

// pagePost admits a POST from the page's own origin, else answers the
// refusal and returns false.
func pagePost(w http.ResponseWriter, r *http.Request, what string) bool {
	if r.Method != http.MethodPost {
		httpguard.WriteError(w, http.StatusMethodNotAllowed, "method-not-allowed", what+" takes POST")
		return false
	}
	if !httpguard.SameOrigin(r) {
		httpguard.WriteError(w, http.StatusForbidden, "forbidden", what+" is accepted only from this relay's own page")
		return false
	}
	return true
}

func (p *Page) login(w http.ResponseWriter, r *http.Request) {
	if !pagePost(w, r, "login") {
		return
	}
	if !p.required() {
		httpguard.WriteError(w, http.StatusConflict, "no-token", "this relay has no token: it is watch-only and needs no login")
		return
	}
	if ok, wait := p.limiter.allow(r.RemoteAddr, time.Now()); !ok {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		p.cfg.Logger.Warn("fleet page login attempts limited", "remote", r.RemoteAddr, "retry_after_s", secs)
		httpguard.WriteError(w, http.StatusTooManyRequests, "too-many-logins",
			fmt.Sprintf("too many login attempts from this address: try again in %d s", secs))
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
	id := make([]byte, idLen)
	if _, err := rand.Read(id); err != nil {
		httpguard.WriteError(w, http.StatusInternalServerError, "internal", "no randomness for a session id")
		return
	}
	now := p.cfg.Now()
	exp := now.Add(p.cfg.SessionTTL).Truncate(time.Second)
	var cookie, secret string
	var who access.Principal
	p.reg.Update(func(tx *credreg.Tx) {
		p.mu.Lock()
		defer p.mu.Unlock()
		var ref access.Ref
		switch {
		case tok == "":
			return
		case subtle.ConstantTimeCompare([]byte(tok), []byte(p.token)) == 1:
			who = access.Owner()
		default:
			var ok bool
			if who, ref, ok = p.cfg.People.Lookup(tok); !ok {
				return
			}
		}
		// A browser already logged in (another tab) with the same token
		// keeps its login: a new cookie would leave the other tab's secret
		// bound to none.
		if c, err := r.Cookie(CookieName(r.Host)); err == nil {
			if held, hexp, href, ok := p.openLocked(c.Value); ok && now.Before(hexp) && href == ref {
				if _, gone := p.ended[held]; !gone {
					id, exp = []byte(held), hexp
				}
			}
		}
		p.rememberLocked(tx, string(id), exp)
		cookie, secret = p.sealLocked(id, exp, ref), p.bindingLocked(string(id))
	})
	if cookie == "" {
		p.cfg.Logger.Info("fleet page login refused", "remote", r.RemoteAddr)
		httpguard.WriteError(w, http.StatusForbidden, "forbidden", "that token is not this relay's")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: CookieName(r.Host), Value: cookie, Path: "/", Expires: exp, MaxAge: int(exp.Sub(now) / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: httpguard.Secure(r),
	})
	p.cfg.Logger.Info("fleet page login", "remote", r.RemoteAddr, "who", who.Name, "role", who.Role)
	httpguard.WriteJSON(w, http.StatusOK, authReply{Required: true, LoggedIn: true, Login: secret}.withPrincipal(who))
}

// rememberLocked holds a login, dropping expired ones and, past MaxLogins,
// ending the one closest to expiry and its connections. p.mu and the
// registry's lock (tx) are held.
func (p *Page) rememberLocked(tx *credreg.Tx, id string, exp time.Time) {
	if _, held := p.logins[id]; held {
		p.logins[id] = exp
		return
	}
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
		tx.End(credreg.ReasonEvicted, credreg.ByID("login:"+hex.EncodeToString([]byte(k))))
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
	gone := &http.Cookie{Name: CookieName(r.Host), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: httpguard.Secure(r)}
	// Only a browser logged in, with its bound secret, may end the logins:
	// a stale cookie (or none) just clears itself.
	var err error
	ended, all := -1, true
	p.reg.Update(func(tx *credreg.Tx) {
		l, in := p.admit(tx, r, false)
		if !in {
			return
		}
		p.mu.Lock()
		defer p.mu.Unlock()
		if !l.who.Can(access.RoleAdmin) {
			// Ending everyone's logins is the admins' (the owner's) to do:
			// anyone else logs out this browser.
			all = false
			delete(p.logins, l.id)
			p.endLocked(l.id, l.exp)
			ended = tx.End(credreg.ReasonLoggedOut, credreg.ByID("login:"+hex.EncodeToString([]byte(l.id))))
			return
		}
		var gen []byte
		if gen, err = newGeneration(p.cfg.LoginsFile == "", p.cfg.LoginsFile); err != nil {
			return
		}
		p.gen, p.key = gen, p.keyFor(gen)
		clear(p.logins)
		clear(p.ended)
		ended = tx.End(credreg.ReasonLoggedOut, credreg.InGroup(LoginGroup))
	})
	if err != nil {
		p.cfg.Logger.Error("fleet page logout not kept", "err", err)
		httpguard.WriteError(w, http.StatusInternalServerError, "internal", "the logout could not be kept; the login still stands")
		return
	}
	switch {
	case ended >= 0 && all:
		p.cfg.Logger.Info("fleet page logout: every browser login ended", "remote", r.RemoteAddr, "connections", ended)
	case ended >= 0:
		p.cfg.Logger.Info("fleet page logout: one browser's login ended", "remote", r.RemoteAddr, "connections", ended)
	}
	http.SetCookie(w, gone)
	httpguard.WriteJSON(w, http.StatusOK, authReply{Required: p.required(), LoggedIn: false})
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
