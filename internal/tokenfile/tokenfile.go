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

	"github.com/aep-kimi/aep-kimi/internal/atomicfile"
	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// NewTokenBytes is the entropy of a token Create makes.
const NewTokenBytes = 32

// Read reads the token in path. follow says whether a link at path is
// read where it points (a file the operator names may well be a link into a
// secret mount) or refused (safefile.ErrLink: the files aep-kimi keeps in
// its home). A file that holds no token, or one torn by a crash, is an
// error naming the fix (Check), never a token-less posture.
func Read(path string, follow bool) (string, error) {
	b, err := ReadSecret(path, follow, "token file")
	if err != nil {
		return "", err
	}
	return Check(path, b, !follow)
}

// Check is the secret a file at path holds (b, trimmed), or an error saying
// why there is none and what to do: an empty file, or one holding bytes no
// secret has (a crash can leave a file its size but zeros). kept says
// aep-kimi made the file in its home, so removing it makes a new one.
func Check(path string, b []byte, kept bool) (string, error) {
	fix := "write the secret into it, or restore it"
	if kept {
		fix = "remove it to make a new one, or restore it"
	}
	tok := httpguard.TrimToken(string(b))
	if tok == "" {
		return "", fmt.Errorf("%s is empty: %s", path, fix)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c < 0x20 || c == 0x7f {
			return "", fmt.Errorf("%s is torn (it holds control bytes no secret has, as a crash leaves): %s", path, fix)
		}
	}
	return tok, nil
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
// made if missing), failing if anything, a link included, is there. The
// token is on the disk, under its name, before Create returns (written
// aside, synced, linked into place, the directory synced): a power cut
// leaves the whole token or no file, never an empty or torn one.
func Create(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("token: %w", err)
	}
	tok, err := Random(NewTokenBytes)
	if err != nil {
		return fmt.Errorf("token: %w", err)
	}
	if err := atomicfile.Write(path, []byte(tok+"\n"), atomicfile.Options{NoReplace: true}); err != nil && !errors.Is(err, atomicfile.ErrDirSync) {
		return fmt.Errorf("token: %w", err)
	}
	return nil
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
