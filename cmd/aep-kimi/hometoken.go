package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/aep-kimi/aep-kimi/internal/httpguard"
	"github.com/aep-kimi/aep-kimi/internal/safefile"
)

// readHomeToken reads the relay token `up` keeps in the AEP home, never
// through a link; a missing file is no token.
func readHomeToken(path string) (string, error) {
	tok, err := readTokenFile(path, false)
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	return tok, err
}

// readTokenFile reads a token file, which must not be readable by others.
// The token is trimmed as every server and client trims it; an empty file
// is no token.
// follow says whether a link at path is read where it points (a file the
// operator names, AEP_TOKEN_FILE, may well be a link into a secret mount)
// or refused (safefile.ErrLink: the files aep-kimi keeps in its home).
func readTokenFile(path string, follow bool) (string, error) {
	open := safefile.OpenFile
	if follow {
		open = os.OpenFile
	}
	f, err := open(path, os.O_RDONLY, 0)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if othersMayRead(st) {
		return "", fmt.Errorf("token file %s is readable by others (mode %v): chmod 600 it", path, st.Mode().Perm())
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	return httpguard.TrimToken(string(b)), nil
}

// othersMayRead reports a token file whose Unix mode lets others read it.
// Windows reports no such modes (access is by ACL, and a file in the
// user's profile is private by default), so nothing is refused there.
func othersMayRead(st os.FileInfo) bool {
	return runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0
}
