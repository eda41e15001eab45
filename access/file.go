package access

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aep-kimi/aep-kimi/aep"
)

// Where the people's tokens and their last uses are kept, under the AEP
// home.
const (
	FileName     = "tokens.json"
	UsesFileName = "tokens.uses.json"
	// fileVersion is the format this package reads and writes.
	fileVersion = 1
	// MaxPeople bounds the entries a file may hold.
	MaxPeople = 1024
	// maxFileBytes bounds the file read.
	maxFileBytes = 1 << 20
	// hashPrefix names the hash function of an entry's token hash.
	hashPrefix = "sha256:"
)

// Entry is one person in the file: never the token, only its hash.
type Entry struct {
	Name string `json:"name"`
	Role Role   `json:"role"`
	// Capture is the ceiling given with --capture; empty means the role's
	// default (DefaultCapture).
	Capture string    `json:"capture,omitempty"`
	Hash    string    `json:"hash"`
	Created time.Time `json:"created"`
}

// Principal is the entry as the relay authenticates it.
func (e Entry) Principal() Principal {
	c := DefaultCapture(e.Role)
	if e.Capture != "" {
		c, _ = aep.ParseCapture(e.Capture) // checked by Parse
	}
	return Principal{Name: e.Name, Role: e.Role, Capture: c, Token: refOfHash(e.Hash)}
}

// File is the tokens file.
type File struct {
	Version int     `json:"version"`
	People  []Entry `json:"people"`
}

// Hash is the hash a token is kept as. Tokens are 32 random bytes, so a
// plain SHA-256 cannot be reversed by guessing: no slow hash is needed.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hashPrefix + hex.EncodeToString(sum[:])
}

// Parse reads a tokens file strictly: unknown fields, an unknown version,
// a bad name, role, capture or hash, and a name or hash given twice are
// refused.
func Parse(b []byte) (File, error) {
	var f File
	if len(bytes.TrimSpace(b)) == 0 {
		return File{Version: fileVersion}, nil
	}
	if len(b) > maxFileBytes {
		return File{}, fmt.Errorf("tokens file: larger than %d bytes", maxFileBytes)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return File{}, fmt.Errorf("tokens file: %w", err)
	}
	if d.More() {
		return File{}, errors.New("tokens file: data after the object")
	}
	if f.Version != fileVersion {
		return File{}, fmt.Errorf("tokens file: version %d, this aep-kimi reads %d", f.Version, fileVersion)
	}
	if len(f.People) > MaxPeople {
		return File{}, fmt.Errorf("tokens file: %d people, at most %d", len(f.People), MaxPeople)
	}
	names := make(map[string]bool, len(f.People))
	hashes := make(map[string]bool, len(f.People))
	for i, e := range f.People {
		if err := checkEntry(e); err != nil {
			return File{}, fmt.Errorf("tokens file: entry %d: %w", i+1, err)
		}
		if names[e.Name] {
			return File{}, fmt.Errorf("tokens file: %q is listed twice", e.Name)
		}
		if hashes[e.Hash] {
			return File{}, fmt.Errorf("tokens file: %q has another entry's token", e.Name)
		}
		names[e.Name], hashes[e.Hash] = true, true
	}
	return f, nil
}

func checkEntry(e Entry) error {
	if err := CheckName(e.Name); err != nil {
		return err
	}
	if _, err := ParseRole(string(e.Role)); err != nil {
		return err
	}
	if e.Capture != "" {
		if _, err := aep.ParseCapture(e.Capture); err != nil {
			return err
		}
	}
	h, ok := strings.CutPrefix(e.Hash, hashPrefix)
	if raw, err := hex.DecodeString(h); !ok || err != nil || len(raw) != sha256.Size || h != strings.ToLower(h) {
		return fmt.Errorf("%q: hash must be %s and 64 lower-case hex digits", e.Name, hashPrefix)
	}
	return nil
}

// Marshal renders f as the file holds it.
func (f File) Marshal() []byte {
	f.Version = fileVersion
	if f.People == nil {
		f.People = []Entry{}
	}
	b, _ := json.MarshalIndent(f, "", "  ") // plain strings and times: cannot fail
	return append(b, '\n')
}

// Find returns the entry named name.
func (f File) Find(name string) (Entry, bool) {
	for _, e := range f.People {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}
