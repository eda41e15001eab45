// Package tokenfile reads and creates the files that hold bearer tokens:
// the relay token `aep-kimi up` keeps under the AEP home and the files an
// operator names (--token-file, AEP_TOKEN_FILE). A token file must not be
// readable by others; its token is trimmed as every server and client
// trims it. Other secrets read the same way (NATS credentials) use
// ReadSecret.
package tokenfile

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// NewTokenBytes is the entropy of a token Create makes.
const NewTokenBytes = 32

// Read reads the token in path; an empty file is no token. follow says
// whether a link at path is read where it points (a file the operator
// names may well be a link into a secret mount) or refused
// (safefile.ErrLink: the files aep-kimi keeps in its home).
func Read(path string, follow bool) (string, error) {
	b, err := ReadSecret(path, follow, "token file")
	if err != nil {
		return "", err
	}
	return httpguard.TrimToken(string(b)), nil
}

// ReadSecret reads a file holding a secret (what, in errors: "token
// file"), which must not be readable by others, as Read does, and returns
// its bytes unchanged.
func ReadSecret(path string, follow bool, what string) ([]byte, error) {
	open := safefile.OpenFile
	if follow {
		open = os.OpenFile
	}
	f, err := open(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", what, &fs.PathError{Op: "open", Path: path, Err: safefile.ErrNotRegular})
	}
	if othersMayRead(st) {
		return nil, fmt.Errorf("%s %s is readable by others (mode %v): chmod 600 it", what, path, st.Mode().Perm())
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}

// ReadHome reads a token aep-kimi keeps under its home, never through a
// link; a missing file is no token.
func ReadHome(path string) (string, error) {
	tok, err := Read(path, false)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return tok, err
}

// Create writes a fresh random token to path (0600, in a 0700 directory
// made if missing), failing if anything, a link included, is there.
func Create(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	tok, err := Random(NewTokenBytes)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	f, err := safefile.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	_, werr := f.WriteString(tok + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// Random is a fresh token of n random bytes, URL-safe base64 without
// padding: what every token aep-kimi makes looks like.
func Random(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// othersMayRead reports a token file whose Unix mode lets others read it.
// Windows reports no such modes (access is by ACL, and a file in the
// user's profile is private by default), so nothing is refused there.
func othersMayRead(st os.FileInfo) bool {
	return runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0
}
