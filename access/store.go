package access

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
	"github.com/aep-kimi/aep-kimi/internal/tokenfile"
)

// TokenBytes is the entropy of a person's token.
const TokenBytes = tokenfile.NewTokenBytes

// ErrUnknown marks a name the file does not hold.
var ErrUnknown = errors.New("no such person")

// Store is the tokens file under an AEP home, as `aep-kimi token` changes
// it: each change runs under a lock beside the file, reads it strictly
// (a file it cannot read is refused, never overwritten) and replaces it
// atomically, so the relay reading it sees the old file or the new one.
type Store struct {
	// Home is the AEP home the files live in.
	Home string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Path is the tokens file's path.
func (s Store) Path() string { return filepath.Join(s.Home, FileName) }

func (s Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// ReadFile reads the tokens file at path: missing is empty; a link, a
// file others may read or one that does not parse is an error.
func ReadFile(path string) (File, []byte, error) {
	b, err := tokenfile.ReadSecret(path, false, "tokens file")
	if errors.Is(err, fs.ErrNotExist) {
		return File{Version: fileVersion}, nil, nil
	}
	if err != nil {
		return File{}, nil, err
	}
	f, err := Parse(b)
	return f, b, err
}

// Add makes a token for a new person and returns it: the only time it is
// ever seen. capture "" gives the role's default.
func (s Store) Add(name string, role Role, capture string) (Entry, string, error) {
	e := Entry{Name: name, Role: role, Capture: capture, Created: s.now().UTC().Truncate(time.Second)}
	tok, err := tokenfile.Random(TokenBytes)
	if err != nil {
		return Entry{}, "", err
	}
	e.Hash = Hash(tok)
	if err := checkEntry(e); err != nil {
		return Entry{}, "", err
	}
	err = s.change(func(f *File) error {
		if _, ok := f.Find(name); ok {
			return fmt.Errorf("%q already has a token: remove it first (aep-kimi token rm %s)", name, name)
		}
		if len(f.People) >= MaxPeople {
			return fmt.Errorf("the tokens file holds %d people, the most it may", MaxPeople)
		}
		f.People = append(f.People, e)
		return nil
	})
	if err != nil {
		return Entry{}, "", err
	}
	return e, tok, nil
}

// Remove revokes name's token; a relay reading the file ends what it
// opened.
func (s Store) Remove(name string) (Entry, error) {
	var gone Entry
	err := s.change(func(f *File) error {
		for i, e := range f.People {
			if e.Name == name {
				gone = e
				f.People = append(f.People[:i:i], f.People[i+1:]...)
				return nil
			}
		}
		return fmt.Errorf("%q: %w", name, ErrUnknown)
	})
	return gone, err
}

// change reads, changes and replaces the file under its lock.
func (s Store) change(fn func(*File) error) error {
	// The home is made if missing, and otherwise left as it is; the files
	// in it are 0600.
	if err := os.MkdirAll(s.Home, 0o700); err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	lock, err := safefile.OpenFile(s.Path()+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("tokens file lock: %w", err)
	}
	defer lock.Close()
	if err := safefile.Lock(lock); err != nil {
		return fmt.Errorf("tokens file lock: %w", err)
	}
	f, _, err := ReadFile(s.Path())
	if err != nil {
		return fmt.Errorf("%w (nothing changed)", err)
	}
	if err := fn(&f); err != nil {
		return err
	}
	if err := atomicfile.Write(s.Path(), f.Marshal(), atomicfile.Options{Perm: 0o600}); err != nil {
		return fmt.Errorf("tokens file: %w", err)
	}
	return nil
}

// Listed is one person as `token list` shows them: never the token.
type Listed struct {
	Name    string `json:"name"`
	Role    Role   `json:"role"`
	Capture string `json:"capture"`
	// Token is the token's ID, as the audit names it.
	Token   string    `json:"token"`
	Created time.Time `json:"created"`
	// LastUse is when the relay last admitted the token; zero if never.
	LastUse time.Time `json:"last_use,omitzero"`
}

// List lists the people, by name, with their last use.
func (s Store) List() ([]Listed, error) {
	f, _, err := ReadFile(s.Path())
	if err != nil {
		return nil, err
	}
	uses := readUses(filepath.Join(s.Home, UsesFileName))
	out := make([]Listed, 0, len(f.People))
	for _, e := range f.People {
		p := e.Principal()
		out = append(out, Listed{Name: e.Name, Role: e.Role, Capture: p.Capture.String(), Token: p.Token.ID(),
			Created: e.Created, LastUse: uses[e.Name]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// readUses reads the last-use file; what cannot be read is no use known.
func readUses(path string) map[string]time.Time {
	b, err := safefile.ReadFile(path)
	if err != nil {
		return nil
	}
	var m map[string]time.Time
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	return m
}
