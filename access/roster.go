package access

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
)

// Ref names a person's token without holding it: the first bytes of its
// hash. A page login, an answer link and a subscribed device keep it, so
// each ends with the token it was made with, and a new token for the same
// name does not revive it. The zero Ref names no token.
type Ref [16]byte

// String is r in hex, as links and files keep it ("" for the zero Ref).
func (r Ref) String() string {
	if r == (Ref{}) {
		return ""
	}
	return hex.EncodeToString(r[:])
}

// refIDBytes is how much of a Ref its ID shows.
const refIDBytes = 6

// ID names the token in the record (the audit, `token list`): the first
// bytes of r in hex, enough to tell one person's tokens apart, never the
// token; "" for the zero Ref.
func (r Ref) ID() string {
	if r == (Ref{}) {
		return ""
	}
	return hex.EncodeToString(r[:refIDBytes])
}

// ParseRef reads a Ref's String; anything else is the zero Ref.
func ParseRef(s string) Ref {
	var r Ref
	if b, err := hex.DecodeString(s); err == nil && len(b) == len(r) {
		copy(r[:], b)
	}
	return r
}

// refOfHash is the Ref of a token kept as h (an Entry's Hash); zero when
// h is not one.
func refOfHash(h string) Ref {
	raw, err := hex.DecodeString(strings.TrimPrefix(h, hashPrefix))
	if err != nil || !strings.HasPrefix(h, hashPrefix) || len(raw) != sha256.Size {
		return Ref{}
	}
	return refOf([sha256.Size]byte(raw))
}

// Roster is the relay's view of the tokens file: the people it admits,
// re-read on Reload, and their last uses, kept on Flush. Its methods are
// safe for concurrent use; a nil Roster admits nobody.
type Roster struct {
	path, usesPath string
	log            *slog.Logger

	mu     sync.RWMutex
	raw    []byte // the file's bytes in force
	byHash map[[sha256.Size]byte]Entry
	byRef  map[Ref]Entry
	err    string // the last reading problem logged

	usesMu sync.Mutex
	uses   map[string]time.Time
	dirty  bool
}

// OpenRoster reads the tokens file in home. A file that cannot be read
// admits nobody (and is logged): the relay's own token still works.
func OpenRoster(home string, log *slog.Logger) *Roster {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Roster{path: filepath.Join(home, FileName), usesPath: filepath.Join(home, UsesFileName), log: log}
	b.uses = readUses(b.usesPath)
	if b.uses == nil {
		b.uses = map[string]time.Time{}
	}
	if apply := b.Reload(); apply != nil {
		apply()
	}
	return b
}

// Path is the tokens file's path.
func (b *Roster) Path() string { return b.path }

// Reload re-reads the file. When it changed, apply puts it in force and
// returns the names whose entry is gone or changed (role, capture or
// token): what those tokens opened must end. The caller runs apply where
// admissions cannot interleave (the relay's credential lock), so no
// connection is admitted by a token after its connections were ended. A
// file that cannot be read keeps the people in force, logged once; nil
// apply means nothing changed.
func (b *Roster) Reload() (apply func() (ended []string)) {
	if b == nil {
		return nil
	}
	f, raw, err := ReadFile(b.path)
	b.mu.Lock()
	defer b.mu.Unlock()
	if err != nil {
		if msg := err.Error(); msg != b.err {
			b.err = msg
			b.log.Warn("tokens file not read; the people in force stay", "path", b.path, "err", err)
		}
		return nil
	}
	if b.err != "" {
		b.log.Info("tokens file read again", "path", b.path)
		b.err = ""
	}
	if b.byHash != nil && bytes.Equal(raw, b.raw) {
		return nil
	}
	return func() []string { return b.apply(f, raw) }
}

// apply puts f in force and returns the names it ended.
func (b *Roster) apply(f File, raw []byte) (ended []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	byHash := make(map[[sha256.Size]byte]Entry, len(f.People))
	byRef := make(map[Ref]Entry, len(f.People))
	byName := make(map[string]Entry, len(f.People))
	for _, e := range f.People {
		h := hashBytes(e.Hash)
		byHash[h] = e
		byRef[refOf(h)] = e
		byName[e.Name] = e
	}
	for _, old := range b.byHash {
		if now, ok := byName[old.Name]; !ok || now.Hash != old.Hash || now.Principal() != old.Principal() {
			ended = append(ended, old.Name)
		}
	}
	if b.byHash != nil {
		b.log.Info("tokens file changed", "people", len(f.People), "ended", ended)
	}
	b.raw, b.byHash, b.byRef = raw, byHash, byRef
	return ended
}

func hashBytes(h string) [sha256.Size]byte {
	var out [sha256.Size]byte
	raw, _ := hex.DecodeString(h[len(hashPrefix):]) // checked by Parse
	copy(out[:], raw)
	return out
}

func refOf(h [sha256.Size]byte) Ref {
	var r Ref
	copy(r[:], h[:])
	return r
}

// Lookup authenticates a person's token, returning their principal and
// the token's Ref, and notes the use.
func (b *Roster) Lookup(token string) (Principal, Ref, bool) {
	if b == nil || token == "" {
		return Principal{}, Ref{}, false
	}
	h := sha256.Sum256([]byte(token))
	b.mu.RLock()
	e, ok := b.byHash[h]
	b.mu.RUnlock()
	if !ok {
		return Principal{}, Ref{}, false
	}
	b.touch(e.Name)
	return e.Principal(), refOf(h), true
}

// Resolve is the principal whose token ref names, while that token stands.
func (b *Roster) Resolve(ref Ref) (Principal, bool) {
	if b == nil {
		return Principal{}, false
	}
	b.mu.RLock()
	e, ok := b.byRef[ref]
	b.mu.RUnlock()
	if !ok {
		return Principal{}, false
	}
	b.touch(e.Name)
	return e.Principal(), true
}

// Current is the person p as the file says now, while the token p was
// admitted with stands; false once that token is gone, though the name
// hold another. Whoever acts for a person outside a connection (an answer
// link minted earlier, a device subscribed earlier) checks they still
// stand.
func (b *Roster) Current(p Principal) (Principal, bool) {
	if b == nil || p.Token == (Ref{}) {
		return Principal{}, false
	}
	b.mu.RLock()
	e, ok := b.byRef[p.Token]
	b.mu.RUnlock()
	if !ok || e.Name != p.Name {
		return Principal{}, false
	}
	return e.Principal(), true
}

// usesGrain is how finely last uses are kept: a busy token is noted once
// a minute, not on every request.
const usesGrain = time.Minute

func (b *Roster) touch(name string) {
	now := time.Now().UTC().Truncate(time.Second)
	b.usesMu.Lock()
	defer b.usesMu.Unlock()
	if now.Sub(b.uses[name]) >= usesGrain {
		b.uses[name] = now
		b.dirty = true
	}
}

// Flush writes the last uses when they changed (the relay calls it on its
// credential poll).
func (b *Roster) Flush() {
	if b == nil {
		return
	}
	b.usesMu.Lock()
	if !b.dirty {
		b.usesMu.Unlock()
		return
	}
	data, _ := json.Marshal(b.uses) // names and times: cannot fail
	b.dirty = false
	b.usesMu.Unlock()
	if err := atomicfile.Write(b.usesPath, data, atomicfile.Options{Perm: 0o600, NoSync: true}); err != nil {
		b.log.Warn("token last uses not kept", "path", b.usesPath, "err", err)
	}
}
