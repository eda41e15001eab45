package notify

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
)

// Answer tokens: each answer link carries one, and it is the link's only
// credential. It names one request, one option, the person the answer is
// attributed to and the surface it comes from, and the time it stops
// answering; the relay's key signs it, so nobody else can mint one or
// change what it answers. Used tokens are remembered across restarts.
const (
	// KeyFileName is the signing key's file under the AEP home (0600).
	KeyFileName = "notify-key"
	// UsedFileName keeps the used tokens (0600) until they expire.
	UsedFileName = "notify-used.json"
	// MaxTokenLen bounds a token read from a link.
	MaxTokenLen = 2048
	// DefaultTokenTTL is how long a link to a request without a deadline
	// stays good (unless the request is resolved first).
	DefaultTokenTTL = 24 * time.Hour
	// MaxUsed bounds the used tokens remembered; past it the soonest to
	// expire is forgotten first (its request is resolved by then in all
	// but the rarest cases, and a resolved request refuses it anyway).
	MaxUsed = 20000
	// tokenVersion is the claims' format.
	tokenVersion = 1
	// nonceBytes is a token's random id.
	nonceBytes = 12
)

// Claims are what an answer token says.
type Claims struct {
	V       int    `json:"v"`
	Nonce   string `json:"n"`
	Session string `json:"s"`
	Request string `json:"r"`
	Option  string `json:"o"`
	By      string `json:"b"` // the person the answer is attributed to
	// Token names the token By held when the link was made
	// (access.Ref; absent for the owner): the link answers while that
	// token stands, never for whoever holds the name later.
	Token   string `json:"k,omitempty"`
	Surface string `json:"f"` // the command's agent: aep-kimi-link, aep-kimi-push
	Expires int64  `json:"e"` // Unix seconds
	// Field names the form field (AEP-0006) Option is a choice of: the
	// link answers the form with that choice for that field, as a list of
	// one when the field takes several (Multi); "" when Option is one of
	// the request's own options.
	Field string `json:"q,omitempty"`
	Multi bool   `json:"m,omitempty"`
}

// answer is what the link answers with: the option, or the form's values.
func (c Claims) answer() map[string]any {
	if c.Field == "" {
		return map[string]any{"option": c.Option}
	}
	var v any = c.Option
	if c.Multi {
		v = []any{c.Option}
	}
	return map[string]any{"values": map[string]any{c.Field: v}}
}

// Token refusals.
var (
	ErrTokenUnknown = errors.New("unknown answer link")
	ErrTokenUsed    = errors.New("this answer link was used already")
	ErrTokenExpired = errors.New("this answer link has expired")
)

// Signer mints and checks answer tokens and remembers the used ones.
type Signer struct {
	key      []byte
	usedPath string // "" keeps the used set in memory only (tests)

	mu   sync.Mutex
	used map[string]int64 // nonce -> expiry (Unix seconds)
}

// OpenSigner reads the signing key under home, made on first use (0600,
// never through a link), and the used tokens kept there.
func OpenSigner(home string) (*Signer, error) {
	path := filepath.Join(home, KeyFileName)
	key, err := tokenfile.ReadHome(path)
	if err == nil && key == "" {
		if err = tokenfile.Create(path); err == nil || errors.Is(err, os.ErrExist) {
			key, err = tokenfile.ReadHome(path)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("notify: answer link key: %w", err)
	}
	if key == "" {
		return nil, fmt.Errorf("notify: answer link key %s is empty", path)
	}
	s := &Signer{key: []byte(key), usedPath: filepath.Join(home, UsedFileName), used: map[string]int64{}}
	b, err := safefile.ReadFile(s.usedPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("notify: used answer links: %w", err)
	default:
		if err := json.Unmarshal(b, &s.used); err != nil {
			return nil, fmt.Errorf("notify: used answer links %s: %w", s.usedPath, err)
		}
	}
	return s, nil
}

// NewMemorySigner signs with key and remembers used tokens in memory only.
func NewMemorySigner(key []byte) *Signer {
	return &Signer{key: bytes.Clone(key), used: map[string]int64{}}
}

// Mint makes the token for c, filling its version and nonce.
func (s *Signer) Mint(c Claims) (string, error) {
	c.V = tokenVersion
	n := make([]byte, nonceBytes)
	if _, err := rand.Read(n); err != nil {
		return "", fmt.Errorf("notify: token: %w", err)
	}
	c.Nonce = base64.RawURLEncoding.EncodeToString(n)
	body, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("notify: token: %w", err)
	}
	p := base64.RawURLEncoding.EncodeToString(body)
	return p + "." + base64.RawURLEncoding.EncodeToString(s.sign(p)), nil
}

func (s *Signer) sign(payload string) []byte {
	h := hmac.New(sha256.New, s.key)
	h.Write([]byte(payload))
	return h.Sum(nil)
}

// Parse checks tok's signature and form and returns its claims; anything
// not minted by this key is ErrTokenUnknown. It does not look at expiry or
// use (Check does).
func (s *Signer) Parse(tok string) (Claims, error) {
	if len(tok) > MaxTokenLen {
		return Claims{}, ErrTokenUnknown
	}
	p, sig, ok := strings.Cut(tok, ".")
	if !ok {
		return Claims{}, ErrTokenUnknown
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil || !hmac.Equal(got, s.sign(p)) {
		return Claims{}, ErrTokenUnknown
	}
	body, err := base64.RawURLEncoding.DecodeString(p)
	if err != nil {
		return Claims{}, ErrTokenUnknown
	}
	var c Claims
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil || dec.More() || c.V != tokenVersion || c.Nonce == "" ||
		c.Session == "" || c.Request == "" || c.Option == "" || c.Surface == "" {
		return Claims{}, ErrTokenUnknown
	}
	return c, nil
}

// Check parses tok and refuses it once used (ErrTokenUsed) or past its
// expiry at now (ErrTokenExpired).
func (s *Signer) Check(tok string, now time.Time) (Claims, error) {
	c, err := s.Parse(tok)
	if err != nil {
		return c, err
	}
	s.mu.Lock()
	_, used := s.used[c.Nonce]
	s.mu.Unlock()
	switch {
	case used:
		return c, ErrTokenUsed
	case now.Unix() >= c.Expires:
		return c, ErrTokenExpired
	}
	return c, nil
}

// Use marks c's token used, durably before it returns: a restart cannot
// replay it. ErrTokenUsed when another use got there first.
func (s *Signer) Use(c Claims, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, used := s.used[c.Nonce]; used {
		return ErrTokenUsed
	}
	s.used[c.Nonce] = c.Expires
	s.pruneLocked(now)
	if err := s.saveLocked(); err != nil {
		delete(s.used, c.Nonce)
		return err
	}
	return nil
}

// Unuse forgets a use whose answer could not be delivered, so the link
// may be tried again.
func (s *Signer) Unuse(c Claims) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.used[c.Nonce]; ok {
		delete(s.used, c.Nonce)
		_ = s.saveLocked() // best effort: kept used is the safe side
	}
}

// pruneLocked keeps the used set within MaxUsed: it forgets expired uses
// (an expired token is refused anyway), then the soonest to expire, down to
// nine tenths of the bound so the next uses need no pruning.
func (s *Signer) pruneLocked(now time.Time) {
	if len(s.used) <= MaxUsed {
		return
	}
	for n, exp := range s.used {
		if exp <= now.Unix() {
			delete(s.used, n)
		}
	}
	keep := MaxUsed * 9 / 10
	if len(s.used) <= keep {
		return
	}
	type use struct {
		n   string
		exp int64
	}
	all := make([]use, 0, len(s.used))
	for n, exp := range s.used {
		all = append(all, use{n, exp})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].exp < all[j].exp })
	for _, u := range all[:len(all)-keep] {
		delete(s.used, u.n)
	}
}

func (s *Signer) saveLocked() error {
	if s.usedPath == "" {
		return nil
	}
	b, err := json.Marshal(s.used)
	if err != nil {
		return fmt.Errorf("notify: used answer links: %w", err)
	}
	if err := atomicfile.Write(s.usedPath, b, atomicfile.Options{}); err != nil && !errors.Is(err, atomicfile.ErrDirSync) {
		return fmt.Errorf("notify: used answer links: %w", err)
	}
	return nil
}
